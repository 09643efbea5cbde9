"""``promptui journal compact``: apply retention to a journal file now and give the freed space
back, saying the bytes before and after."""

from __future__ import annotations

import json
from pathlib import Path

import typer
from rich.markup import escape

from promptui.cli.options import JOURNAL_OPTION, err, fail, json_option, wrapped

MANIFESTS_ARGUMENT = typer.Argument(None, help="Manifest files or folders: each process they "
                                    "declare is compacted by its own journal.retention.")
MAX_AGE_OPTION = typer.Option(None, "--max-age", help="Remove finished runs older than this "
                              "('7d', '12h', '30m', or seconds) for every process no manifest "
                              "gives a retention.")
KEEP_RUNS_OPTION = typer.Option(None, "--keep-runs", help="Keep only the newest N finished "
                                "runs of every process no manifest gives a retention.")


def journal_compact(
    manifests: list[Path] | None = MANIFESTS_ARGUMENT,
    journal: Path = JOURNAL_OPTION,
    max_age: str | None = MAX_AGE_OPTION,
    keep_runs: int | None = KEEP_RUNS_OPTION,
    as_json: bool = json_option("The report as one JSON object."),
) -> None:
    """Remove old finished runs' entries now, then give every free page back.

    What goes is what the background retention would remove: finished runs past --max-age
    or beyond the newest --keep-runs (a manifest's own journal.retention for its process),
    never what recovery, open or waiting runs, queued events, dead letters, incidents or the
    delivery index need, and never the runs a restart's conversation reads. Without limits
    nothing is removed and only free space is given back. Prints the bytes before and after
    and the entries and runs removed per process. Refused while a runtime holds the journal
    (it applies its processes' retention itself, in the background): stop it first. A file
    not yet switched to incremental vacuuming is switched here by one VACUUM (about 1 s per
    100 MB, and as much free disk as the file takes)."""
    from promptui.cli.options import load_manifests
    from runtime_core.control.compact import (
        DEFAULT_CONVERSATION_RUNS,
        JournalError,
        JournalLocked,
        compact_journal,
        default_policy,
    )
    from runtime_core.manifest.loader import ManifestError

    try:
        default = default_policy(max_age, keep_runs)
    except ValueError as exc:
        raise fail(str(exc)) from None
    try:
        declared = load_manifests(list(manifests)) if manifests else []
    except ManifestError as exc:
        for problem in exc.problems:
            err.print(escape(str(problem)))
        raise typer.Exit(1) from None
    try:
        report = compact_journal(journal, default, declared)
    except JournalLocked as exc:
        raise fail(f"{exc} (a running runtime applies its processes' journal.retention "
                   "itself, in the background)") from None
    except JournalError as exc:
        raise fail(str(exc)) from None
    if as_json:
        print(json.dumps(report.to_dict(), indent=2))
        return
    for line in report.lines():
        wrapped.print(escape(line))
    if keep_runs is not None and keep_runs < DEFAULT_CONVERSATION_RUNS:
        wrapped.print(f"the newest {DEFAULT_CONVERSATION_RUNS} finished runs of a process "
                      "without a manifest stay whatever --keep-runs says: a restart's "
                      "conversation reads them back (give its manifest, with a smaller "
                      "context.conversation_max_messages, to keep fewer)")
    if default is None and not any(m.config.journal.retention for m in declared):
        wrapped.print("nothing was removed: give --max-age or --keep-runs (or manifests that "
                      "set journal.retention) to remove old runs")
