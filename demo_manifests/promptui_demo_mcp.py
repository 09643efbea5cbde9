"""The demo's MCP server: a changelog of requested deploys, kept in PROMPTUI_DEMO_DIR.

Run by the ``changelog`` demo process over stdio. It also serves MCP over streamable HTTP
on loopback, for trying a ``type: http`` server entry:

    python demo_manifests/promptui_demo_mcp.py --http --port 8765   # then url: http://127.0.0.1:8765/mcp

Its tools carry MCP annotations, which is how promptui knows their effect: ``lookup_build`` is
read-only; ``append_changelog`` writes (not destructively) and is idempotent: a repeated call with
the same idempotency key (filled in by promptui as ``run_id:step``) adds nothing.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import os
import socket
import sys
from pathlib import Path

from mcp.server.mcpserver import MCPServer
from mcp.types import ToolAnnotations

server = MCPServer("promptui-demo-changelog", log_level="WARNING")


def changelog() -> Path:
    return Path(os.environ.get("PROMPTUI_DEMO_DIR", ".promptui/demo")) / "changelog.md"


@server.tool(annotations=ToolAnnotations(read_only_hint=True))
def lookup_build(build: int) -> dict[str, object]:
    """Look up a build: its number, whether its tests passed, and the lines already written."""
    path = changelog()
    lines = path.read_text(encoding="utf-8").splitlines() if path.exists() else []
    return {"build": build, "tests": "failed" if build % 2 else "passed",
            "changelog_lines": sum(1 for line in lines if f"build {build}:" in line)}


@server.tool(annotations=ToolAnnotations(read_only_hint=False, destructive_hint=False,
                                         idempotent_hint=True))
def append_changelog(build: int, line: str, idempotency_key: str = "") -> str:
    """Append one line to the changelog for a build (once per idempotency key)."""
    path = changelog()
    path.parent.mkdir(parents=True, exist_ok=True)
    marker = f"<!-- {idempotency_key} -->" if idempotency_key else ""
    if marker and path.exists() and marker in path.read_text(encoding="utf-8"):
        return f"already written for {idempotency_key}"
    with path.open("a", encoding="utf-8") as fh:
        fh.write(f"- build {build}: {line} {marker}".rstrip() + "\n")
    return f"changelog: build {build}: {line}"


@server.tool(annotations=ToolAnnotations(read_only_hint=False, destructive_hint=True))
def clear_changelog() -> str:
    """Delete the whole changelog (destructive)."""
    changelog().unlink(missing_ok=True)
    return "changelog cleared"


async def serve_http(host: str, port: int) -> None:
    """Streamable HTTP on a socket bound here, so ``--port 0`` can say which port it got."""
    import uvicorn

    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind((host, port))
    sock.listen(64)
    print(f"LISTENING http://{host}:{sock.getsockname()[1]}/mcp", flush=True)
    config = uvicorn.Config(server.streamable_http_app(host=host), log_level="warning",
                            lifespan="on")
    await uvicorn.Server(config).serve(sockets=[sock])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--http", action="store_true", help="serve streamable HTTP, not stdio")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8765, help="0 picks a free port")
    args = parser.parse_args(argv)
    logging.getLogger().setLevel(logging.WARNING)
    if args.http:
        asyncio.run(serve_http(args.host, args.port))
    else:
        server.run()
    return 0


if __name__ == "__main__":
    sys.exit(main())
