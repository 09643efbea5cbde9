"""Import a manifest's Python tools in a child process, as a start would, and say which fail.

A start imports each ``module:function`` in the runtime's own process; a module that raises,
calls sys.exit, crashes or hangs there takes the start down. ``promptui validate`` asks the
same question of a child (``sys.executable``, the caller's sys.path with the manifest's folder
in front, as the runtime puts it), under a timeout, so the answer never takes validate down.
The child reports each tool as it goes, into a file (a module's prints go to its stderr), and
a tool that ended or hung the child is blamed with what happened; the rest are tried again in
a fresh child.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import tempfile
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from runtime_core.agent.config import ToolDeclaration

#: Seconds one child may take to import the tools it was given.
IMPORT_TIMEOUT = 10.0
_CHILD = ("import json, sys; sys.path[:] = json.loads(sys.argv[1]); "
          "from runtime_core.agent.tool_probe import child_main; child_main(sys.argv[2])")
_PARALLEL = 8
_MARK = b"\x00promptui-tool-probe\x00"  # on the output before each tool: whose lines follow


@dataclass(frozen=True, slots=True)
class ToolJob:
    """One manifest's tools, and the folder its tool modules import from."""

    folder: Path
    tools: tuple[ToolDeclaration, ...]


def probe_tools(jobs: Sequence[ToolJob], *, timeout: float = IMPORT_TIMEOUT
                ) -> list[list[str | None]]:
    """For each job, for each of its tools: why a start would not load it (None: it loads)."""
    if not jobs:
        return []
    with ThreadPoolExecutor(max_workers=min(_PARALLEL, len(jobs))) as pool:
        return list(pool.map(lambda job: _probe_job(job, timeout), jobs))


def _probe_job(job: ToolJob, timeout: float) -> list[str | None]:
    results: dict[int, str | None] = {}
    taken: dict[str, int] = {}  # tool names loaded so far: a second one is refused, as at start
    while len(results) < len(job.tools):
        todo = [i for i in range(len(job.tools)) if i not in results]
        reported, ended = _one_child(job, todo, taken, timeout)
        for index, (error, name) in reported.items():
            results[index] = error
            if error is None and name is not None:
                taken[name] = index
        blamed = next((i for i in todo if i not in reported), None)
        if blamed is None:
            break
        module = job.tools[blamed].path.partition(":")[0]
        for index in todo:  # its module would end or hang a retry too
            if index not in reported and job.tools[index].path.partition(":")[0] == module:
                results[index] = f"tool {job.tools[index].path!r}: importing module " \
                                 f"{module!r} {ended}"
    return [results.get(i) for i in range(len(job.tools))]


def _one_child(job: ToolJob, todo: list[int], taken: dict[str, int], timeout: float
               ) -> tuple[dict[int, tuple[str | None, str | None]], str]:
    """Run one child over ``todo``: what it reported, and how it ended if it stopped early."""
    payload = {"folder": str(job.folder.resolve()), "taken": taken,
               "tools": {str(i): job.tools[i].model_dump() for i in todo}}
    with tempfile.TemporaryDirectory(prefix="promptui-tools-") as scratch:
        report, output = Path(scratch) / "report.jsonl", Path(scratch) / "output"
        (Path(scratch) / "job.json").write_text(json.dumps(payload), encoding="utf-8")
        with output.open("w+b") as sink:
            # output to a file, not a pipe: a grandchild holding a pipe would keep us waiting
            child = subprocess.Popen(
                [sys.executable, "-P", "-c", _CHILD, json.dumps(sys.path), scratch],
                stdin=subprocess.DEVNULL, stdout=sink, stderr=sink,
                start_new_session=os.name == "posix")
            try:
                code: int | None = child.wait(timeout)
            except subprocess.TimeoutExpired:
                code = None
            finally:
                _end(child)
            sink.seek(max(0, sink.seek(0, os.SEEK_END) - 65536))  # a chatty module: the end
            tail = _last_line(sink.read().rpartition(_MARK)[2][-4000:])
        reported = _read_report(report)
    if code is None:
        ended = f"did not finish within {timeout:g} s (does it wait for something at import?)"
    elif code < 0:
        ended = f"killed the process ({_signal_name(-code)})"
    else:
        ended = f"ended the process (exit status {code})"
    return reported, ended + (f": {tail}" if tail and code is not None else "")


def _end(child: subprocess.Popen[bytes]) -> None:
    """Kill the child and whatever it started (its own session), then reap it."""
    with contextlib.suppress(OSError):
        if os.name == "posix":
            os.killpg(child.pid, signal.SIGKILL)
        else:
            child.kill()
    child.wait()


def _read_report(report: Path) -> dict[int, tuple[str | None, str | None]]:
    reported: dict[int, tuple[str | None, str | None]] = {}
    with contextlib.suppress(OSError):
        for line in report.read_text(encoding="utf-8").splitlines():
            try:
                row = json.loads(line)
                reported[int(row["index"])] = (row.get("error"), row.get("name"))
            except (ValueError, KeyError, TypeError):
                break  # a torn last line: that tool is blamed like an unfinished one
    return reported


def _last_line(output: bytes) -> str:
    lines = [line.strip() for line in output.decode("utf-8", "replace").splitlines()]
    return next((line for line in reversed(lines) if line), "")[:300]


def _signal_name(number: int) -> str:
    try:
        return signal.Signals(number).name
    except ValueError:
        return f"signal {number}"


def child_main(scratch: str) -> None:
    """In the child: load each tool as a start would, one JSON line per tool, then exit at once
    (a thread or an atexit hook a module left behind must not keep the child alive)."""
    from runtime_core.agent.tools import ToolError, load_tool  # before the folder is on the path

    job: dict[str, Any] = json.loads(Path(scratch, "job.json").read_text(encoding="utf-8"))
    sys.path.insert(0, job["folder"])
    os.dup2(2, 1)  # a module's prints go to the output file, not into the report
    taken: dict[str, int] = dict(job["taken"])
    with Path(scratch, "report.jsonl").open("a", encoding="utf-8") as report:
        for index, fields in job["tools"].items():
            declared = ToolDeclaration.model_validate(fields)
            name: str | None = None
            os.write(2, _MARK + b"\n")
            try:
                name = load_tool(declared.path, name=declared.name,
                                 description=declared.description, effect=declared.effect).name
                error = None
                if name in taken:
                    error = f"two tools are named {name!r}; give one of them name="
                taken.setdefault(name, int(index))
            except ToolError as exc:
                error = str(exc)
            except BaseException as exc:  # what a start would report, whatever it is
                error = f"tool {declared.path!r}: {type(exc).__name__}: {exc}"
            report.write(json.dumps({"index": int(index), "error": error, "name": name}) + "\n")
            report.flush()
    os._exit(0)
