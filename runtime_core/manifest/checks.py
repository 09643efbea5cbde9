"""What ``promptui validate`` checks beyond a manifest's text: what would otherwise fail only
when the process starts. A manifest that validates must start.

* each tool ``module:function`` imports and builds (in a child process, under a timeout:
  agent/tool_probe.py), and no two tools share a name;
* a ``scripted:<file>`` model's file exists, is safe YAML and is a script;
* a file_watch ``watch_path`` is a readable folder, or can be created (the trigger creates a
  missing one at start, so that is fine); a file, or a parent that is a file or not writable,
  is an error, since the trigger would fail at start;
* a hook's command program exists (a warning: it may be installed before the start), and a
  hook's callback module can be found (with imports);
* two webhook triggers of the processes checked together do not want the same path on the
  same address (the second would not start); a webhook port something already listens on is a
  warning (it may be free when the process runs; port 0 never is).

Each finding is a ManifestProblem at the field that causes it.
"""

from __future__ import annotations

import importlib.util
import os
import shutil
import socket
import sys
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from runtime_core.agent.config import ToolDeclaration
from runtime_core.agent.tool_probe import IMPORT_TIMEOUT, ToolJob, probe_tools
from runtime_core.config import ProcessConfig
from runtime_core.manifest.source import ManifestError, ManifestProblem, Positions, dotted

__all__ = ["IMPORT_TIMEOUT", "StartReport", "check_start"]


class Checkable(Protocol):
    """What the checks need of a loaded manifest (runtime_core.manifest.loader.Manifest)."""

    @property
    def config(self) -> ProcessConfig: ...
    @property
    def path(self) -> Path: ...
    @property
    def base_dir(self) -> Path: ...
    @property
    def positions(self) -> Positions: ...


@dataclass(slots=True)
class StartReport:
    """One manifest's start-time findings: errors (it would not start) and warnings."""

    errors: list[ManifestProblem] = field(default_factory=list)
    warnings: list[ManifestProblem] = field(default_factory=list)


def check_start(manifests: Sequence[Checkable], *, imports: bool = True,
                import_timeout: float = IMPORT_TIMEOUT) -> list[StartReport]:
    """A report for each manifest, in order. ``imports=False`` skips importing tool modules
    (which runs their code)."""
    reports = [StartReport() for _ in manifests]
    served: dict[tuple[str, int, str], str] = {}
    for manifest, report in zip(manifests, reports, strict=True):
        def found(where: tuple[Any, ...], message: str, *, warning: bool = False,
                  manifest: Checkable = manifest, report: StartReport = report) -> None:
            line, column = manifest.positions.find(where)
            problem = ManifestProblem(str(manifest.path), line, column, dotted(where), message)
            (report.warnings if warning else report.errors).append(problem)

        config = manifest.config
        for place, message, warning in _hook_problems(config, manifest.base_dir, imports):
            found(place, message, warning=warning)
        if (script := _script_problem(config.model, manifest.base_dir)) is not None:
            found(("model",), script)
        for index, trigger in enumerate(config.triggers):
            if trigger.type == "file_watch" and trigger.watch_path is not None and (
                    unusable := _watch_problem(trigger.watch_path)) is not None:
                found(("triggers", index, "watch_path"), unusable)
            if trigger.type == "webhook" and trigger.webhook_port != 0:
                address = (trigger.webhook_host, trigger.webhook_port, trigger.webhook_path)
                where = f"{manifest.path}: triggers[{index}]"
                if address in served:
                    found(("triggers", index, "webhook_path"),
                          f"{served[address]} already wants path {trigger.webhook_path!r} on "
                          f"{trigger.webhook_host}:{trigger.webhook_port}; give one another "
                          "path or port")
                served.setdefault(address, where)
        for index, trigger in enumerate(config.triggers):  # after the paths: one bind each
            if trigger.type == "webhook" and trigger.webhook_port != 0 and not any(
                    t.type == "webhook" and (t.webhook_host, t.webhook_port)
                    == (trigger.webhook_host, trigger.webhook_port)
                    for t in config.triggers[:index]):
                busy = _port_problem(trigger.webhook_host, trigger.webhook_port)
                if busy:
                    found(("triggers", index, "webhook_port"), busy, warning=True)
    if imports:
        _check_tools(manifests, reports, import_timeout)
    return reports


def _check_tools(manifests: Sequence[Checkable], reports: list[StartReport],
                 timeout: float) -> None:
    jobs, owners = [], []
    for manifest, report in zip(manifests, reports, strict=True):
        declared = tuple(t if isinstance(t, ToolDeclaration) else ToolDeclaration(path=t)
                         for t in manifest.config.tools)
        if declared:
            jobs.append(ToolJob(manifest.base_dir, declared))
            owners.append((manifest, report))
    for (manifest, report), errors in zip(owners, probe_tools(jobs, timeout=timeout),
                                          strict=True):
        for index, error in enumerate(errors):
            if error is not None:
                line, column = manifest.positions.find(("tools", index, "path"))
                report.errors.append(ManifestProblem(str(manifest.path), line, column,
                                                     f"tools[{index}]", error))


def _hook_problems(config: ProcessConfig, base_dir: Path, imports: bool
                   ) -> list[tuple[tuple[Any, ...], str, bool]]:
    """A hook command that is not there (a warning), a callback module that cannot be found
    (an error; with ``imports``: finding a module in a package imports the package)."""
    found: list[tuple[tuple[Any, ...], str, bool]] = []
    for index, hook in enumerate(config.hooks):
        if hook.command:
            program = hook.command[0]
            folder = (Path(hook.cwd).expanduser() if hook.cwd else base_dir).resolve()
            local = os.sep in program or program.startswith(".")
            there = (folder / program).is_file() if local else shutil.which(program) is not None
            if not there:
                found.append((("hooks", index, "command"), f"program {program!r} is not there "
                              f"(looked in {folder if local else 'PATH'}); the hook fails "
                              "each time it runs until it is", True))
        elif imports and isinstance(hook.callback, str):
            module = hook.callback.partition(":")[0]
            added = str(base_dir.resolve()) not in sys.path
            if added:
                sys.path.insert(0, str(base_dir.resolve()))
            try:
                spec = importlib.util.find_spec(module)
            except (ImportError, ValueError):
                spec = None
            finally:
                if added:
                    sys.path.remove(str(base_dir.resolve()))
            if spec is None:
                found.append((("hooks", index, "callback"), f"module {module!r} is not found "
                              "(beside the manifest or installed); correct the path "
                              "'module:function'", False))
    return found


def _script_problem(model: Any, base_dir: Path) -> str | None:
    """Why a ``scripted:<file>`` model would not load at start (as build_model finds it)."""
    if not isinstance(model, str) or not model.startswith("scripted:"):
        return None
    from runtime_core.agent.model import ModelError
    from runtime_core.agent.scripted import load_script_file
    from runtime_core.manifest.source import read_text, read_yaml

    path = Path(model.partition(":")[2].strip()).expanduser()
    if not path.is_absolute():
        path = base_dir / path
    try:  # the same safe pass as a manifest first: a script is YAML too, and may be a bomb
        read_yaml(read_text(path), str(path))
    except ManifestError as exc:
        first = exc.problems[0]
        place = f"{first.file}:{first.line}:{first.column}"
        if first.message.startswith("not valid YAML: "):  # in the start's words, and where
            return (f"model script {first.file} is not valid YAML: {place}: "
                    f"{first.message.removeprefix('not valid YAML: ')}")
        if not first.message.startswith("cannot read"):  # else: the start's own words below
            where = f"{first.path}: " if first.path else ""
            return f"model script {place}: {where}{first.message}"
    try:
        load_script_file(path)
    except (ModelError, ValueError) as exc:
        return str(exc)
    return None


def _watch_problem(watch_path: str) -> str | None:
    """Why a file_watch root would fail at start, resolved as the trigger resolves it: ``~``
    expanded, relative to the working folder; a missing one is created then."""
    root = Path(watch_path).expanduser().resolve()
    if root.exists():
        if not root.is_dir():
            return f"watch_path {str(root)!r} is not a directory"
        if not os.access(root, os.R_OK | os.X_OK):
            return f"watch_path {str(root)!r} cannot be read (permissions)"
        return None
    parent = root.parent
    while not parent.exists() and parent != parent.parent:
        parent = parent.parent
    if not parent.is_dir():
        return f"watch_path {str(root)!r} cannot be created: {str(parent)!r} is not a directory"
    if not os.access(parent, os.W_OK | os.X_OK):
        return (f"watch_path {str(root)!r} does not exist and cannot be created in "
                f"{str(parent)!r} (permissions)")
    return None


def _port_problem(host: str, port: int) -> str | None:
    """Whether the webhook server could listen now, bound as it binds (SO_REUSEADDR)."""
    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM,
                                   flags=socket.AI_PASSIVE)
    except OSError as exc:
        return f"webhook_host {host!r} does not resolve here: {exc}"
    family, kind, proto, _, address = infos[0]
    with socket.socket(family, kind, proto) as sock:
        if sys.platform != "win32":
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind(address)
        except OSError as exc:
            return (f"cannot listen on {host}:{port} now: {exc.strerror or exc}; the process "
                    "will not start unless it is free by then")
    return None
