"""The control API for a test to call: in the test's own event loop (``served``: uvicorn on
127.0.0.1, port 0 or a given port, over a LocalControl), or as a real ``promptui serve``
subprocess (``start_serve``, on port 0, returning once it listens), with the manifests it runs.
Every ``promptui serve`` started is kept in ``STARTED``: ``stop_servers_started_after`` kills
those a failed test left running (tests/e2e/conftest.py does it after each test)."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import re
import signal
import subprocess
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import pytest

from runtime_core import AgentRuntime
from runtime_core.api.server import create_app, make_server
from runtime_core.control import LocalControl
from tests.helpers.cli import promptui_command
from tests.helpers.polling import poll

# -- in the test's event loop -------------------------------------------------------------------
TOKEN = "test-token-0123456789abcdef"


@asynccontextmanager
async def served(runtime: AgentRuntime, *, port: int = 0, read_only: bool = False,
                 name: str = "t", **options: Any) -> AsyncIterator[str]:
    """The server's URL while the block runs; the runtime is closed when it ends (as a
    stopping server does)."""
    app = create_app(LocalControl(runtime, name=name), token=TOKEN, read_only=read_only,
                     **options)
    urls: list[str] = []
    server = make_server(app, host="127.0.0.1", port=port, on_ready=urls.append)
    task = asyncio.create_task(server.serve())
    deadline = time.monotonic() + 10
    while not urls:
        if task.done():
            task.result()  # raises what stopped it
            raise RuntimeError("the server stopped before it listened")
        if time.monotonic() > deadline:
            raise TimeoutError("the server did not start listening")
        await asyncio.sleep(0.01)
    try:
        yield urls[0]
    finally:
        server.handle_exit(15, None)
        with contextlib.suppress(asyncio.CancelledError):
            await asyncio.wait_for(task, 15)


# -- promptui serve, a subprocess ----------------------------------------------------------------
START_TIMEOUT = 30.0
STOP_TIMEOUT = 30.0
STARTED: list[subprocess.Popen[bytes]] = []  # every server start_serve started

WORKER = """\
version: "1.0"
name: {name}
instructions: Do the task.
model:
  provider: scripted
  turns:
    - reply: Done.
journal: {{level: checkpoint}}
health: {{enabled: true, on_anomaly: log}}
incidents: {{fingerprint: payload.summary}}
"""
BROKEN = """\
version: "1.0"
name: broken
instructions: Deploy.
model:
  provider: scripted
  turns:
    - raise: the target refused the connection
journal: {level: checkpoint}
config:
  trigger_delivery: {max_retries: 0}
  max_consecutive_failures: 1000
"""
JUDGE = """\
version: "1.0"
name: judge
instructions: Answer with a solution.
model:
  provider: scripted
  turns:
    - reply: ""
profile:
  name: judge
  version: "1"
  completion: {evaluator: solution}
journal: {level: checkpoint}
"""


#: A served process with one scripted reply and a webhook on a free port at /hook; ``extra``
#: adds trigger lines (indented as list items).
HOOK_AGENT = """\
version: "1.0"
name: hook
instructions: Do the task.
model:
  provider: scripted
  turns:
    - reply: Done.
journal: {{level: checkpoint}}
triggers:
  - {{type: webhook, webhook_host: 127.0.0.1, webhook_port: 0, webhook_path: /hook}}
{extra}"""


def hook_agent(extra: str = "") -> str:
    """HOOK_AGENT with ``extra`` trigger lines."""
    return HOOK_AGENT.format(extra=extra)


def write_agents(folder: Path, *, worker_names: tuple[str, ...] = ("worker",),
                 broken: bool = True, judge: bool = True) -> Path:
    agents = folder / "agents"
    agents.mkdir(parents=True, exist_ok=True)
    for name in worker_names:
        (agents / f"{name}.agent").write_text(WORKER.format(name=name))
    if broken:
        (agents / "broken.agent").write_text(BROKEN)
    if judge:
        (agents / "judge.agent").write_text(JUDGE)
    return agents


@dataclass
class Served:
    """A running ``promptui serve`` and how to reach it."""

    proc: subprocess.Popen[bytes]
    folder: Path
    log: Path
    url: str
    token: str
    ready_line: str
    clients: list[httpx.Client] = field(default_factory=list)

    def client(self, *, token: str | None = None, **headers: str) -> httpx.Client:
        given = self.token if token is None else token
        auth = {"Authorization": f"Bearer {given}"} if given else {}
        client = httpx.Client(base_url=f"{self.url}/api/v1", headers={**auth, **headers},
                              timeout=httpx.Timeout(15.0))
        self.clients.append(client)
        return client

    def stderr(self) -> str:
        return self.log.read_text(encoding="utf-8", errors="replace")

    def stop(self, sig: int = signal.SIGTERM, timeout: float = STOP_TIMEOUT) -> int:
        for client in self.clients:
            client.close()
        if self.proc.poll() is None:
            self.proc.send_signal(sig)
        try:
            return self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(10)
            pytest.fail(f"promptui serve did not stop within {timeout}s:\n{self.stderr()}")


def start_serve(folder: Path, *args: str, token: str | None = None,
                log_name: str = "serve.log") -> Served:
    """``promptui serve --port 0 ARGS`` in ``folder``; returns once it is listening."""
    folder.mkdir(parents=True, exist_ok=True)
    env = {**os.environ, "PROMPTUI_DEMO_WEBHOOK_PORT": "0",
           "PROMPTUI_DEMO_DIR": str(folder / "demo")}
    env.pop("PROMPTUI_TOKEN", None)
    if token is not None:
        env["PROMPTUI_TOKEN"] = token
    log = folder / log_name
    with log.open("wb") as sink:
        proc = subprocess.Popen([*promptui_command(), "serve", "--port", "0", *args],
                                cwd=folder, env=env, stdin=subprocess.DEVNULL,
                                stdout=subprocess.DEVNULL, stderr=sink)
    STARTED.append(proc)

    def listening() -> re.Match[str] | None:
        if proc.poll() is not None:
            pytest.fail(f"promptui serve exited {proc.returncode}:\n{log.read_text()}")
        return re.search(r"promptui serve: listening on (http://\S+) \((.*)\)",
                         log.read_text(errors="replace"))

    try:
        found = poll(listening, START_TIMEOUT, "promptui serve to listen")
    except BaseException:
        proc.kill()
        proc.wait(10)
        raise
    discovery = json.loads((folder / ".promptui" / "serve.json").read_text())
    assert discovery["url"] == found.group(1) and discovery["pid"] == proc.pid
    secret = token if token is not None else \
        Path(discovery["token_file"]).read_text().strip()
    return Served(proc, folder, log, found.group(1), secret, found.group(0))


def stop_servers_started_after(before: set[int]) -> None:
    """Kill every server in ``STARTED`` still running that is not in ``before`` (their ids)."""
    for proc in STARTED:
        if id(proc) not in before and proc.poll() is None:
            proc.kill()
            proc.wait(10)


# -- a process whose write tool appends to a ledger beside the manifests' folder ----------------
WRITER = """\
version: "1.0"
name: writer
instructions: Book the payment.
model:
  provider: scripted
  turns:
    - tool_calls: [{name: book_payment, args: {ref: $payload.ref}}]
    - reply: Booked.
tools:
  - {path: "ledger_tools:book_payment", effect: write}
journal: {level: checkpoint}
"""
WRITER_TOOLS = '''\
from pathlib import Path

LEDGER = Path(__file__).resolve().parent.parent / "ledger.txt"


def book_payment(ref: str) -> str:
    """Append one line per booking: the test counts them."""
    with LEDGER.open("a", encoding="utf-8") as ledger:
        ledger.write(ref + "\\n")
    return f"booked {ref}"
'''
