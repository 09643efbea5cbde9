"""What the journal alone says about its processes, for ``promptui status`` and ``promptui
dead-letters`` when no server runs: read-only, so looking never changes the file."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from rich import box
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from promptui.format import TimeMode, when


def journal_rows(path: Path) -> list[dict[str, Any]]:
    """One row per process: its last state, its last entry and its dead letters."""
    from runtime_core.control.offline import process_names

    return [_journal_row(path, name) for name in process_names(path)]


def _journal_row(path: Path, name: str) -> dict[str, Any]:
    from runtime_core.control.offline import dead_letters, read_entries

    moves = read_entries(path, name, entry_type="state_transition", limit=1, newest_first=True)
    shutdowns = read_entries(path, name, entry_type="shutdown", limit=1, newest_first=True)
    last = read_entries(path, name, limit=1, newest_first=True)
    state = str(moves[0].data.get("to_state", "")) if moves else None
    if shutdowns and (not moves or shutdowns[0].seq > moves[0].seq):
        # 'promptui serve' stopped by SIGTERM: the journal is sealed there, as after a crash
        state = f"shut down ({shutdowns[0].data.get('pending', 0)} pending)"
    return {"name": name,
            "last_state": state,
            "last_entry_type": last[0].entry_type if last else "",
            "last_entry_at": last[0].timestamp if last else None,
            "dead_letters": len(dead_letters(path, name))}


def print_journal_status(rows: list[dict[str, Any]], path: Path, as_json: bool,
                         out: Console, *, time_format: str = "iso", wide: bool = False) -> None:
    """The journal's view of its processes; times as ``--time`` asked, every column whole
    with ``wide``."""
    import time

    from promptui.cli.options import print_table
    from runtime_core.control.offline import holder

    mode: TimeMode = "relative" if time_format == "relative" else "iso"
    now = time.time()

    held = holder(path)  # a room or 'promptui run' on it: its pid, to stop or to kill
    if as_json:
        print(json.dumps({"runtime": None, "source": "journal", "journal": str(path),
                          "held_by": held, "processes": rows}, indent=2))
        return
    table = Table("process", "last state", "last entry", "at", "dead letters",
                  title=f"from the journal (no server running): {escape(str(path))}",
                  box=box.SIMPLE_HEAD)
    for row in rows:
        table.add_row(escape(row["name"]), escape(row["last_state"] or "-"),
                      escape(row["last_entry_type"]),
                      when(row["last_entry_at"], mode, now) if row["last_entry_at"] else "-",
                      str(row["dead_letters"]))
    print_table(table, wide=wide)
    if held is not None:
        out.print(f"Open in a runtime now: {escape(held['text'])} (a control room or "
                  "'promptui run').")
    out.print("Live state, queues and runs need a server: 'promptui serve', or --url.")
