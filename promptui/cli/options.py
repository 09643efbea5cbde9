"""What the commands share: the consoles, the options (--url / --token, --journal, --json), the
error exit, which served runtime a command talks to, one call to it, and loading manifests into
a runtime. Only the standard library, typer and rich load here; the runtime loads inside the
functions that need it, so ``promptui --help`` stays fast.

Which server: ``--url``, else ``PROMPTUI_URL``, else the ``.promptui/serve.json`` that
``promptui serve`` leaves in its folder while it runs. The token: ``--token``, else
``PROMPTUI_TOKEN``, else the token file that server named."""

from __future__ import annotations

import json
import os
import socket
import sys
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

import typer
from rich.console import Console
from rich.markup import escape
from rich.measure import Measurement
from rich.table import Table
from rich.text import Text

from promptui.bundled import demo_manifests_dir, missing_message
from promptui.format import TimeMode, when

if TYPE_CHECKING:
    from runtime_core.control.remote import RemoteControl
    from runtime_core.manifest.loader import Manifest
    from runtime_core.runtime import AgentRuntime

T = TypeVar("T")

# -- consoles --------------------------------------------------------------------------------
console = Console()  # the version, the headless run's live table
out = Console(highlight=False)  # what a command prints
wrapped = Console(soft_wrap=True, highlight=False)  # reports whose long lines must not wrap
err = Console(stderr=True, soft_wrap=True, highlight=False)  # what went wrong

# -- options -----------------------------------------------------------------------------------
URL_ENV = "PROMPTUI_URL"
TOKEN_ENV = "PROMPTUI_TOKEN"
DISCOVERY_FILE = Path(".promptui") / "serve.json"
DEFAULT_TOKEN_FILE = Path(".promptui") / "token"
DEFAULT_JOURNAL = Path(".promptui/journal.db")
#: The bundled demo's folder: in the installed package, or the checkout's demo_manifests/.
BUNDLED_DEMO = demo_manifests_dir()

URL_OPTION = typer.Option(None, "--url", help="A served runtime (promptui serve), e.g. "
                          "http://127.0.0.1:8765 (default: PROMPTUI_URL, or the server "
                          "running in this folder).")
TOKEN_OPTION = typer.Option(None, "--token", help="The server's token (default: "
                            "PROMPTUI_TOKEN, or the token file of the server running here).")


def _journal_file(path: Path) -> Path:
    """The journal file ``--journal PATH`` means, by the rule a start follows (a folder holds
    ``journal.db``); a one-line error for a reference FileJournal folder not imported yet."""
    if path.suffix and not path.is_dir():
        return path  # a file path: as given (the runtime loads only when needed)
    from runtime_core.control.offline import JournalError, journal_file_at

    try:
        return journal_file_at(path)
    except JournalError as exc:
        raise fail(str(exc)) from None


JOURNAL_OPTION = typer.Option(DEFAULT_JOURNAL, "--journal", "-j", callback=_journal_file,
                              help="The journal file, or a folder holding it as journal.db "
                              "(default .promptui/journal.db).")
#: What tells a PostgreSQL DSN given where a journal path goes from a path.
DSN_SCHEMES = ("postgresql://", "postgres://")


def is_dsn(text: str) -> bool:
    """Whether ``text`` is a PostgreSQL URI, not a journal file's path."""
    return text.lower().startswith(DSN_SCHEMES)


def _journal_or_dsn(value: str) -> str:
    """``--journal PATH|DSN``: a DSN as given (a Path would fold its ``//``), else the journal
    file the path means, as ``--journal PATH`` takes it."""
    return value if is_dsn(value) else str(_journal_file(Path(value)))


#: --journal for the commands that only read, which read a PostgreSQL journal too.
JOURNAL_OR_DSN_OPTION = typer.Option(
    str(DEFAULT_JOURNAL), "--journal", "-j", metavar="PATH|DSN", callback=_journal_or_dsn,
    help="The journal file, or a folder holding it as journal.db (default "
    ".promptui/journal.db); or a PostgreSQL journal's DSN (postgresql://USER@HOST:PORT/DB), "
    "read-only.")
#: --cluster for the commands that only read: the database 'promptui serve --cluster' names.
CLUSTER_JOURNAL_OPTION = typer.Option(
    None, "--cluster", metavar="DSN", help="Read the journal of the scale-out cluster on "
    "this PostgreSQL, read-only, while its nodes run: the DSN 'promptui serve --cluster' "
    "takes; 'env' reads it from PROMPTUI_DSN (keeps a password out of the process list).")
RUNTIME_JOURNAL_OPTION = typer.Option(None, "--journal", help="Journal file for every "
                                      "journaling process (default: .promptui/journal.db).")
PATHS_ARGUMENT = typer.Argument(None, help="Manifest files or folders of .agent files "
                                "(default: the bundled demo).")
NAME_ARGUMENT = typer.Argument(..., help="The process name.")


def json_option(help: str) -> Any:
    """``--json``, with what it prints."""
    return typer.Option(False, "--json", help=help)


def _time_mode(value: str) -> str:
    if value not in ("iso", "relative"):
        raise typer.BadParameter(f"{value!r} is not a time format: use iso (2026-12-06 "
                                 "22:14:03) or relative (3 min ago)")
    return value


#: --time for every command that prints times: the room's two formats (its `a` key).
TIME_OPTION = typer.Option("iso", "--time", metavar="iso|relative", callback=_time_mode,
                           help="How times read: iso (local date and time, 2026-12-06 "
                           "22:14:03) or relative (3 min ago, in 2 s).")
#: --wide for every command that prints a table.
WIDE_OPTION = typer.Option(False, "--wide", help="Print every column whole, however wide the "
                           "terminal (for pipes and less -S); default: fit the terminal.")


def stamp(timestamp: float, mode: str, now: float | None = None) -> str:
    """``timestamp`` as ``--time`` asked (iso by default), at ``now`` (default: the clock)."""
    import time

    chosen: TimeMode = "relative" if mode == "relative" else "iso"
    return when(timestamp, chosen, time.time() if now is None else now)


def print_table(table: Table, *, wide: bool = False) -> None:
    """Print a command's table: as wide as the terminal it shows on (rich measures stdout,
    stdin and stderr, so a pipe does not shrink it to 80 columns while a terminal is there;
    ``COLUMNS`` wins), cells cut with an ellipsis where it must; ``wide``: every column whole,
    the lines as long as they need to be, as they also are with no terminal at all (a script,
    cron, a CI log: there is no width to fit, and a cut cell is lost to grep)."""
    if not wide and not _no_terminal():
        _last_column_gives_way(table)
        out.print(table)
        return
    table.expand = False  # as wide as the cells, no wider
    for column in table.columns:
        column.no_wrap, column.overflow, column.max_width = True, "ignore", None
    measured = Measurement.get(out, out.options.update(width=1_000_000), table).maximum
    whole = Console(width=max(20, measured), highlight=False, soft_wrap=False,
                    force_terminal=out.is_terminal)
    whole.print(table)


def _last_column_gives_way(table: Table) -> None:
    """A table too wide for the terminal cuts its last column (a summary, a payload, a
    fingerprint) rather than every column a little: "proce…  incide…  g…" says nothing. When
    even the others do not fit, rich's own squeeze and wrap stay (nothing is cropped away)."""
    widths = [max((Text.from_markup(c).cell_len for c in
                   [str(column.header), *(str(cell) for cell in column.cells)]), default=1)
              for column in table.columns[:-1]]
    gaps = (table.padding[1] + table.padding[3]) * (len(table.columns) - 1 + table.pad_edge)
    if sum(widths) + gaps + 3 > out.width:  # 3: room for a last column to start
        return
    for column, width in zip(table.columns[:-1], widths, strict=True):
        column.min_width = width


def _no_terminal() -> bool:
    """No width to fit: neither ``COLUMNS`` nor a terminal on stdin, stdout or stderr."""
    if "COLUMNS" in os.environ:
        return False
    return not any(_isatty(fd) for fd in (0, 1, 2))


def _isatty(fd: int) -> bool:
    try:
        return os.isatty(fd)
    except OSError:  # closed
        return False


# -- errors ------------------------------------------------------------------------------------
START_ONE = f"start one with 'promptui serve', or give --url / set {URL_ENV}"
NO_SERVER = f"no server: {START_ONE}"
HINTS = {
    "UNAUTHORIZED": f"pass the server's token with --token (or set {TOKEN_ENV})",
    "UNREACHABLE": "is 'promptui serve' running there? Check the URL and the port",
}


def fail(message: str, code: int = 2) -> typer.Exit:
    """Print ``message`` as an error; the exit to raise."""
    err.print(f"[red]error:[/red] {escape(message)}")
    return typer.Exit(code)


def journal_problem(exc: Exception) -> str:
    """The one line for a journal error. A journal held by the 'promptui serve' running in
    this folder says how to go through it instead (its URL), not only who holds it."""
    from runtime_core.control.offline import JournalLocked

    if not isinstance(exc, JournalLocked) or exc.holder is None \
            or exc.holder.is_this_process():
        return str(exc)
    served = _discovered()
    if served is not None and served.get("pid") == exc.holder.pid \
            and exc.holder.host == socket.gethostname():
        url = served["url"]
        return (f"journal {exc.path} is held by promptui serve (pid {exc.holder.pid}, {url}): "
                f"run this with --url {url}, or stop the server")
    return f"{exc} (a 'promptui serve' holding it takes this command with --url and its address)"


def check_process(path: Path, process: str) -> None:
    """Exit 2 unless the journal at ``path`` has entries for ``process``."""
    from runtime_core.control.offline import JournalError
    from runtime_core.control.offline import check_process as check

    try:
        check(path, process)
    except JournalError as exc:
        raise fail(journal_problem(exc)) from None


# -- confirmations -------------------------------------------------------------------------------
YES_OPTION = typer.Option(False, "--yes", "-y", help="Go ahead without asking.")


def confirm(what: str, why: str = "", *, yes: bool, type_name: str | None = None) -> None:
    """The command line's one rule for a bulk or irreversible action: it asks first, saying
    what it will do, with "no" as the default answer; ``--yes`` skips the question; with no
    terminal on stdin (a script, a pipe, CI) and no --yes it refuses (exit 2) rather than hang
    or guess. With ``type_name`` the answer is that name typed out, anything else cancels (the
    control room's rule before an irreversible rewind). Returns when it may go ahead; a "no"
    prints "Nothing changed." and exits 1."""
    if yes:
        return
    if not sys.stdin.isatty():
        raise fail(f"{what}: not asked, as stdin is not a terminal; pass --yes (-y) to go "
                   "ahead")
    question = what[:1].upper() + what[1:] + "?" + (f" {why}" if why else "")
    if type_name is None:
        agreed = typer.confirm(question, default=False)
    else:
        typed = typer.prompt(f"{question}\nType {type_name} to go ahead (anything else "
                             "cancels)", default="", show_default=False)
        agreed = typed.strip() == type_name
    if not agreed:
        out.print("Nothing changed.")
        raise typer.Exit(1)


# -- which server --------------------------------------------------------------------------------
class TargetError(ValueError):
    pass


@dataclass(frozen=True, slots=True)
class ServerTarget:
    url: str
    token: str
    found_by: str  # "--url", "PROMPTUI_URL" or the discovery file


def _pid_alive(pid: object) -> bool:
    if not isinstance(pid, int) or pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _discovered() -> dict[str, object] | None:
    try:
        data = json.loads(DISCOVERY_FILE.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    if not isinstance(data, dict) or not isinstance(data.get("url"), str):
        return None
    return data if _pid_alive(data.get("pid")) else None


def _read_token(path: Path) -> str:
    try:
        return path.read_text(encoding="utf-8").strip()
    except OSError as exc:
        raise TargetError(f"cannot read the token file {path}: {exc.strerror}; give --token "
                          f"or set {TOKEN_ENV}") from None


def find_server(url: str | None = None, token: str | None = None) -> ServerTarget | None:
    """The server to talk to, or None when none is named or running here."""
    found_by = "--url"
    discovered = None
    if not url:
        url, found_by = os.environ.get(URL_ENV, "").strip(), URL_ENV
    if not url:
        discovered = _discovered()
        if discovered is None:
            return None
        url, found_by = str(discovered["url"]), str(DISCOVERY_FILE)
    token = (token or os.environ.get(TOKEN_ENV, "")).strip()
    if not token:
        named = discovered.get("token_file") if discovered is not None else None
        if isinstance(named, str) and named:
            token = _read_token(Path(named))
        elif DEFAULT_TOKEN_FILE.exists():
            token = _read_token(DEFAULT_TOKEN_FILE)
    return ServerTarget(url.rstrip("/"), token, found_by)


def server_for(url: str | None, token: str | None,
               journal: Path | None = None) -> ServerTarget | None:
    """The server a command talks to, or None for the local journal. A ``--journal`` other
    than the default, without ``--url``, means that file: an explicit flag beats the
    environment and a server running here."""
    if not url and journal is not None and journal != DEFAULT_JOURNAL:
        return None
    try:
        return find_server(url, token)
    except TargetError as exc:
        raise fail(str(exc)) from None


def need_server(url: str | None, token: str | None) -> ServerTarget:
    target = server_for(url, token)
    if target is None:
        raise fail(NO_SERVER)
    return target


def on_server(target: ServerTarget, action: Callable[[RemoteControl], Awaitable[T]]) -> T:
    """``action`` with a RemoteControl on ``target``, closed after; a refused or failed call is
    printed in red and exits 1."""
    import asyncio

    from runtime_core.control.plane import ControlError
    from runtime_core.control.remote import RemoteControl

    try:
        control = RemoteControl(target.url, token=target.token)
    except ValueError as exc:
        raise fail(f"{exc} ({target.found_by})") from None

    async def go() -> T:
        try:
            return await action(control)
        finally:
            await control.close()

    try:
        return asyncio.run(go())
    except ControlError as exc:
        hint = HINTS.get(exc.code)
        raise fail(f"{exc}; {hint}" if hint else str(exc), 1) from None


# -- manifests into a runtime --------------------------------------------------------------------
def load_runtime(paths: list[Path], *,
                 journal: Path | None = None) -> tuple[AgentRuntime, list[str]]:
    """A runtime with every process the given files and folders declare, and their warnings.
    ``journal`` moves every journaling process's journal to that file. Raises ManifestError
    listing every problem."""
    from runtime_core.runtime import AgentRuntime

    manifests = load_manifests(paths)
    if journal is not None:
        for manifest in manifests:
            if manifest.config.journal.level != "none":
                manifest.config.journal.path = str(journal)
    runtime = AgentRuntime()
    runtime._add_manifests(manifests)  # one validated batch
    return runtime, [w for m in manifests for w in m.warnings]


def load_manifests(paths: list[Path]) -> list[Manifest]:
    """Every manifest the given files and folders hold; ManifestError listing every
    problem."""
    from runtime_core.manifest.loader import ManifestError, load_directory, load_manifest

    manifests: list[Manifest] = []
    problems = []
    for path in paths:
        try:
            if path.is_dir():
                manifests.extend(load_directory(path))
            else:
                manifests.append(load_manifest(path))
        except ManifestError as exc:
            problems.extend(exc.problems)
    if problems:
        raise ManifestError(problems)
    return manifests


def load_or_exit(paths: list[Path] | None, *, journal: Path | None = None) -> AgentRuntime:
    """``load_runtime`` for a command that starts the runtime (the bundled demo when no path
    is given): every manifest problem printed and exit 1; a journal the start would refuse
    (a bad path, held by another runtime, damaged where recovery reads it) printed as one line
    and exit 2, before anything starts; or the runtime with its warnings printed."""
    from runtime_core.control.offline import JournalError
    from runtime_core.manifest.loader import ManifestError

    targets = list(paths) if paths else [BUNDLED_DEMO]
    if BUNDLED_DEMO in targets and not BUNDLED_DEMO.is_dir():
        raise fail(missing_message("the bundled demo", BUNDLED_DEMO))
    try:
        runtime, warnings = load_runtime(targets, journal=journal)
    except ManifestError as exc:
        for problem in exc.problems:
            err.print(escape(str(problem)))
        raise typer.Exit(1) from None
    for warning in warnings:
        err.print(f"[yellow]warning:[/yellow] {escape(warning)}")
    try:
        runtime.check_journals()
    except JournalError as exc:
        raise fail(str(exc)) from None
    return runtime


DRAIN_OPTION = typer.Option(
    30.0, "--drain-timeout", min=0, max=3600, metavar="SECONDS",
    help="On SIGTERM or Ctrl+C, let the runs in flight finish first, up to this long (a "
    "process's own drain_timeout wins); 0 stops at once. A second signal stops at once.")


RUN_ARGUMENT = typer.Argument(..., help="The waiting run's id (its first characters will do).")


def waiting_run(target: ServerTarget, name: str, run_id: str, reason: str, instead: str
                ) -> tuple[str, dict[str, Any]]:
    """The full id and the wait's detail of ``name``'s waiting run named by ``run_id`` (or the
    start of it) on ``target``; refused unless it waits for ``reason`` (``instead`` says for
    what, e.g. "a write to be reconciled")."""

    async def read(control: RemoteControl) -> tuple[str, dict[str, Any]]:
        waiting = [r.run_id for r in await control.runs(name, state="waiting")]
        matches = [r for r in waiting if r == run_id] or [r for r in waiting
                                                          if r.startswith(run_id)]
        if len(matches) != 1:
            listed = ", ".join(r[:8] for r in waiting) or "none"
            raise fail(f"{name} has no run {run_id!r} waiting (waiting runs: {listed})"
                       if not matches else
                       f"{run_id!r} names {len(matches)} waiting runs of {name}; give more of "
                       "the id")
        return matches[0], await control.waiting_detail(name, matches[0])

    full_id, detail = on_server(target, read)
    if detail.get("reason") != reason:
        raise fail(f"run {full_id} waits for {detail.get('reason')!r}, not for {instead}; "
                   "settle it in the control room or through the API")
    return full_id, detail
