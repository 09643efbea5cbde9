"""Scripts the tests start as subprocesses: MCP servers of our own, started by path (this folder
holds no module named like a package they import), and workers run with ``python -m
tests.helpers.workers.<name>`` (crash_worker, read_crash_worker, node_worker)."""

from __future__ import annotations

from pathlib import Path

HERE = Path(__file__).resolve().parent
ASKING_SERVER = HERE / "asking_server.py"  # asks questions (elicitation) and samples
EXTRAS_SERVER = HERE / "extras_server.py"  # resources, prompts, progress, content kinds
FLAKY_SERVER = HERE / "flaky_server.py"  # a ledger over stdio or HTTP, killed and restarted
LEDGER_SERVER = HERE / "ledger_server.py"  # a write tool with an outside ledger
LOOPBACK = HERE / "loopback.mjs"  # a node preload: the npm servers bind 127.0.0.1 only

