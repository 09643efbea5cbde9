"""Import cost: what a fresh interpreter loads for the two first things a user types.

``from runtime_core import AgentProcess, ProcessConfig`` loads the config models and the
facade's class, not the machinery a process may never use: the MCP SDK, the HTTP servers
(uvicorn, starlette), the HTTP client (httpx), rich, or asyncio. ``promptui --help`` builds
the command tree without the control room (textual), MCP, the web servers or asyncio. Each
part loads when a process or command uses it (see the Python API page, "Import cost")."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

HEAVY_FOR_THE_RUNTIME = ("mcp", "uvicorn", "starlette", "httpx", "rich", "asyncio")
HEAVY_FOR_THE_HELP = ("textual", "mcp", "uvicorn", "starlette", "httpx", "asyncio")


def loaded_after(code: str) -> list[str]:
    """The top-level packages a fresh interpreter holds after running ``code``."""
    child = textwrap.dedent(code) + textwrap.dedent("""
        import json, sys
        print(json.dumps(sorted({name.split(".")[0] for name in sys.modules})))
    """)
    done = subprocess.run([sys.executable, "-c", child], capture_output=True, text=True,
                          timeout=60, check=False)
    assert done.returncode == 0, done.stderr
    loaded: list[str] = json.loads(done.stdout.splitlines()[-1])
    return loaded


def test_importing_the_process_and_its_config_loads_no_server_client_or_sdk() -> None:
    loaded = loaded_after("from runtime_core import AgentProcess, ProcessConfig\n")
    assert "runtime_core" in loaded and "pydantic" in loaded
    assert [name for name in HEAVY_FOR_THE_RUNTIME if name in loaded] == []


def test_promptui_help_loads_neither_the_room_nor_mcp_nor_the_servers() -> None:
    loaded = loaded_after("""
        import contextlib, io, sys
        from promptui.cli.main import app
        sys.argv = ["promptui", "--help"]
        with contextlib.redirect_stdout(io.StringIO()), contextlib.suppress(SystemExit):
            app()
    """)
    assert "typer" in loaded
    assert [name for name in HEAVY_FOR_THE_HELP if name in loaded] == []
