// Preloaded into a reference MCP server under test (NODE_OPTIONS=--import): a listen() on a
// port alone binds 127.0.0.1, not every interface, so the tests expose nothing to the network.
import net from "node:net";

const listen = net.Server.prototype.listen;
net.Server.prototype.listen = function (...args) {
  const port = args[0];
  const portOnly = typeof port === "number" || (typeof port === "string" && /^\d+$/.test(port));
  if (portOnly && typeof args[1] !== "string") {
    args.splice(1, 0, "127.0.0.1");
  }
  return listen.apply(this, args);
};
