"""``promptui serve``: the runtime headless behind the HTTP control API, for an ops box where
the runtime must outlive an SSH session. It prints where it listens, leaves a discovery file
(``.promptui/serve.json``) for a CLI in the same folder, and stops cleanly on SIGTERM or
Ctrl+C as a service restart: the next start re-queues what was queued or running."""

from __future__ import annotations

import contextlib
import json
import logging
import os
import signal
import sys
from collections.abc import Callable
from enum import Enum
from pathlib import Path
from typing import Any

import typer
from rich.markup import escape

from promptui.cli.cluster_serve import (
    CLUSTER_OPTION,
    LEASE_TTL_OPTION,
    MAX_PROCESSES_OPTION,
    NODE_GRACE_OPTION,
    NODE_ID_OPTION,
    NODE_PRUNE_OPTION,
    load_cluster,
)
from promptui.cli.headless import StartFailed
from promptui.cli.options import (
    BUNDLED_DEMO,
    DISCOVERY_FILE,
    DRAIN_OPTION,
    PATHS_ARGUMENT,
    RUNTIME_JOURNAL_OPTION,
    err,
    fail,
    load_or_exit,
)
from promptui.format import log_time


class _GuardDefault:
    """--max-body's default, runtime_core.api.guard's DEFAULT_MAX_BODY, read only when asked
    for (this command runs, or its --help): the runtime stays out of ``promptui --help``."""

    def __call__(self) -> int:
        from runtime_core.api.guard import DEFAULT_MAX_BODY

        return DEFAULT_MAX_BODY

    def __str__(self) -> str:
        return str(self())


class _QuietStartFailure:
    """ASGI middleware: when processes fail to start, uvicorn is not handed the lifespan's
    traceback to log; 'promptui serve' says what failed instead, one line each."""

    def __init__(self, app: Any, *, failed: Callable[[], bool]) -> None:
        self.app = app
        self.failed = failed

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] != "lifespan":
            await self.app(scope, receive, send)
            return

        async def sending(message: Any) -> None:
            if message.get("type") == "lifespan.startup.failed" and self.failed():
                message = {**message, "message": ""}
            await send(message)

        await self.app(scope, receive, sending)


PLAIN_FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"
UVICORN_LOGGERS = ("uvicorn", "uvicorn.error", "uvicorn.access", "uvicorn.asgi")


class LogFormat(str, Enum):
    plain = "plain"
    json = "json"


class LogLevel(str, Enum):
    debug = "debug"
    info = "info"
    warning = "warning"
    error = "error"


class JsonFormatter(logging.Formatter):
    """One JSON object a line: time, level, logger, message (and the traceback, if any)."""

    def format(self, record: logging.LogRecord) -> str:
        data: dict[str, Any] = {
            "time": log_time(record.created, record.msecs),
            "level": record.levelname,
            "logger": record.name,
            "message": record.getMessage(),
        }
        if record.exc_info:
            data["exc_info"] = self.formatException(record.exc_info)
        elif record.exc_text:
            data["exc_info"] = record.exc_text
        return json.dumps(data, ensure_ascii=False, default=str)


def configure_logging(log_format: LogFormat, level: LogLevel) -> logging.Handler:
    """The root logger to stderr; uvicorn's loggers go through the same handler (returned)."""
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(JsonFormatter() if log_format is LogFormat.json
                         else logging.Formatter(PLAIN_FORMAT))
    root = logging.getLogger()
    for old in list(root.handlers):
        root.removeHandler(old)
    root.addHandler(handler)
    root.setLevel(level.value.upper())
    for name in UVICORN_LOGGERS:
        named = logging.getLogger(name)
        named.handlers.clear()
        named.propagate = True
        named.setLevel(logging.NOTSET)
    # watchfiles says "N changes detected" at INFO for every file a file_watch trigger sees.
    logging.getLogger("watchfiles").setLevel(max(logging.WARNING, root.level))
    return handler


def write_discovery(path: Path, data: dict[str, Any]) -> None:
    """``path`` with ``data``, readable by its owner only, replaced in one step."""
    path.parent.mkdir(parents=True, exist_ok=True)
    partial = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    fd = os.open(partial, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as handle:
        handle.write(json.dumps(data, indent=2) + "\n")
    os.replace(partial, path)


def remove_discovery(path: Path) -> None:
    """Remove ``path`` if it is still ours (another server may have started since)."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return
    if isinstance(data, dict) and data.get("pid") == os.getpid():
        with contextlib.suppress(OSError):
            path.unlink()


def serve(
    paths: list[Path] = PATHS_ARGUMENT,
    host: str = typer.Option("127.0.0.1", "--host", help="Address to listen on. Keep it "
                             "loopback and reach it over an SSH tunnel."),
    port: int = typer.Option(8765, "--port", min=0, max=65535,
                             help="Port to listen on (0: any free port)."),
    journal: Path | None = RUNTIME_JOURNAL_OPTION,
    read_only: bool = typer.Option(False, "--read-only", help="Answer reads only: every "
                                   "mutating request is refused (403 READ_ONLY)."),
    token_file: Path = typer.Option(Path(".promptui/token"), "--token-file",
                                    help="The bearer token's file, made (0600) at first start; "
                                    "PROMPTUI_TOKEN overrides it."),
    log_format: LogFormat = typer.Option(LogFormat.plain, "--log-format",
                                         help="Log lines on stderr: plain text or JSON."),
    log_level: LogLevel = typer.Option(LogLevel.info, "--log-level", help="Least log level."),
    max_body: int = typer.Option(_GuardDefault(), "--max-body", min=1,
                                 help="Largest request body in bytes."),
    drain_timeout: float = DRAIN_OPTION,
    cluster: str | None = CLUSTER_OPTION,
    node_id: str | None = NODE_ID_OPTION,
    max_processes: int | None = MAX_PROCESSES_OPTION,
    lease_ttl: float = LEASE_TTL_OPTION,
    node_grace: float | None = NODE_GRACE_OPTION,
    node_prune_after: float = NODE_PRUNE_OPTION,
    trusted_proxies: str | None = typer.Option(
        None, "--trusted-proxies", help="Comma-separated proxy addresses or networks whose "
        "X-Forwarded-For names the client (the API and webhooks' allowed_sources); none by "
        "default: the header is ignored. Also PROMPTUI_TRUSTED_PROXIES."),
) -> None:
    """Run the runtime headless behind the HTTP control API (Ctrl+C or SIGTERM stops it);
    with --cluster, as one node of a scale-out cluster on PostgreSQL."""
    import asyncio

    from runtime_core.api.guard import is_loopback
    from runtime_core.api.server import create_app, make_server
    from runtime_core.api.token import TOKEN_ENV, TokenError, load_or_create_token
    from runtime_core.control.local import LocalControl

    log_handler = configure_logging(log_format, log_level)
    if trusted_proxies is not None:
        from runtime_core.api.server import trust_proxies

        try:
            trust_proxies(trusted_proxies)
        except ValueError as exc:
            raise fail(f"--trusted-proxies: {exc}") from None
    targets = list(paths) if paths else [BUNDLED_DEMO]
    try:
        token, where = load_or_create_token(token_file)
    except (TokenError, OSError) as exc:
        raise fail(f"no API token: {exc}") from None
    if cluster is None and (node_id is not None or max_processes is not None):
        raise fail("--node-id and --max-processes go with --cluster DSN")
    if cluster is not None and journal is not None:
        raise fail("--journal does not go with --cluster: every process journals to the "
                   "cluster's PostgreSQL")
    name = "demo" if not paths else ", ".join(p.name for p in targets)[:40]
    node = None
    if cluster is None:
        runtime = load_or_exit(targets, journal=journal)
        control = LocalControl(runtime, name=name, read_only=read_only)
    else:
        node = load_cluster(targets, cluster, node_id=node_id, max_processes=max_processes,
                            ttl_s=lease_ttl, name=name, read_only=read_only,
                            node_grace_s=node_grace, node_prune_after_s=node_prune_after)
        runtime, control = node.runtime, node.control
    from runtime_core.log_redaction import redact_handler

    redact_handler(log_handler, lambda: runtime.processes.values())  # a tool may log a secret
    loopback = is_loopback(host)
    if not loopback:
        err.print(f"[yellow]warning:[/yellow] listening on {escape(host)}, beyond this "
                  "machine: the API is plain HTTP, so the token and everything else cross "
                  "the network in clear. Prefer --host 127.0.0.1 and an SSH tunnel "
                  "(ssh -L 8765:127.0.0.1:8765 ops-box).")
    app = create_app(control, token=token, read_only=read_only, loopback_only=loopback,
                     max_body=max_body, drain_timeout=drain_timeout,
                     cluster=None if node is None else node.host)
    app.add_middleware(_QuietStartFailure, failed=lambda: bool(
        runtime.start_failures or app.state.start_error))
    from_env = where == TOKEN_ENV
    shown = "token from PROMPTUI_TOKEN" if from_env else f"token in {where}"
    discovery = DISCOVERY_FILE.absolute()
    ready: list[str] = []

    def on_bound(url: str) -> None:
        if node is not None:  # its address in the cluster: registered as it joins
            node.host.address = url

    def on_ready(url: str) -> None:
        ready.append(url)
        found: dict[str, Any] = {
            "url": url, "pid": os.getpid(), "name": name,
            "token_file": None if from_env else str(token_file.absolute())}
        if node is not None:
            found.update(node_id=node.host.node_id, cluster=node.host.shown)
            print(f"promptui serve: node {node.host.node_id} of the cluster at "
                  f"{node.host.shown} (lease TTL {node.host.ttl_s:g} s)", file=sys.stderr,
                  flush=True)
        write_discovery(discovery, found)
        print(f"promptui serve: listening on {url} ({shown})", file=sys.stderr, flush=True)

    server = make_server(app, host=host, port=port, on_ready=on_ready, on_bound=on_bound)
    # uvicorn installs the same handler while it serves; this one covers the moments before
    # (a SIGTERM while processes start still stops it) and after (a stock uvicorn raises the
    # signal again once stopped, which would end the process with -15 instead of 0).
    previous = {sig: signal.signal(sig, server.handle_exit)
                for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        asyncio.run(server.serve())
    except (KeyboardInterrupt, SystemExit):  # a second Ctrl+C; uvicorn's exit on a bind error
        pass
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
        remove_discovery(discovery)
    if getattr(app.state, "closed", None) is False:  # None: the runtime never started
        err.print("[red]error:[/red] the runtime did not stop cleanly (the log above says "
                  "why); the next start recovers what the journal holds")
        sys.stderr.flush()
        os._exit(1)  # a journal left open keeps a thread that would hold the process forever
    if runtime.start_failures:  # shut down already, by the lifespan
        raise StartFailed(runtime.start_problems()).exit()
    if app.state.start_error:
        raise fail(app.state.start_error)
    if not ready:
        raise fail(f"the server did not start on {host}:{port}; the log above says why", 1)
    left: dict[str, dict[str, int]] = getattr(app.state, "left", {})
    pending = sum(c["pending"] for c in left.values())
    dead = sum(c["dead_letters"] for c in left.values())
    print(f"promptui serve: stopped cleanly; {pending} queued or running event(s) are kept in "
          f"the journal for the next start, {dead} dead letter(s) for redelivery",
          file=sys.stderr, flush=True)
