"""The incidents table and the detail of the incident under the cursor: state, generation,
occurrences, last seen and linked runs, open ones first."""

from __future__ import annotations

from rich.text import Text

from promptui.format import TimeMode, age, clip, when
from promptui.widgets.keyed_table import Cell, Col, KeyedTable, fill_width
from runtime_core.control.views import IncidentView

STATE_STYLES = {"open": "bold red", "recovered": "green", "resolved": "cyan"}
# Widths that keep every column but the fingerprint on an 80-column terminal.
COLUMNS = (Col("id", "Incident", 8), Col("process", "Process", 14), Col("state", "State", 9),
           Col("gen", "Gen", 3), Col("occ", "Occ", 4), Col("seen", "Seen", 4),
           Col("runs", "Runs", 10), Col("fingerprint", "Fingerprint", 10))


def incident_row(view: IncidentView, now: float) -> tuple[str, tuple[Cell, ...]]:
    runs = f"{len(view.run_ids)} {view.run_ids[-1][:8]}" if view.run_ids else "0"
    return (row_key(view), (
        Text(view.incident_id[:8], style="bold" if view.state == "open" else ""),
        clip(view.process, 14), Text(view.state, style=STATE_STYLES.get(view.state, "")),
        str(view.generation), str(view.occurrences), age(now - view.last_seen), runs,
        clip(view.fingerprint, 200)))


def row_key(view: IncidentView) -> str:
    return f"{view.process}/{view.incident_id}"


def incident_detail(view: IncidentView | None, now: float, mode: TimeMode = "iso") -> Text:
    if view is None:
        return Text("no incidents: a process opens one when a webhook or event with a new "
                    "fingerprint arrives ('incidents:' in its manifest)", style="dim")
    text = Text(view.incident_id[:16], style="bold")  # what fits 80 columns on one line
    text.append(f"  {view.process}  ", style="dim")
    text.append(view.state, style=STATE_STYLES.get(view.state, ""))
    text.append(f"  generation {view.generation} · version {view.version}", style="dim")
    text.append(f"\nfingerprint {clip(view.fingerprint, 300)}")
    text.append(f"\nopened {when(view.opened_at, mode, now)} · last seen "
                f"{when(view.last_seen, 'relative', now)} · {view.occurrences} occurrence"
                f"{'' if view.occurrences == 1 else 's'} · runs "
                f"{', '.join(r[:8] for r in view.run_ids[-4:]) or 'none'}")
    if view.closed_at is not None:
        text.append(f"\n{view.state} {when(view.closed_at, mode, now)} by {view.resolved_by}",
                    style=STATE_STYLES.get(view.state, ""))
        if view.note:
            text.append(f": {clip(view.note, 200)}")
    elif view.note:
        text.append(f"\nnote: {clip(view.note, 200)}")
    if view.last_payload:
        text.append(f"\nlast payload {clip(view.last_payload, 300)}", style="dim")
    return text


class IncidentTable(KeyedTable):
    def on_resize(self) -> None:
        fill_width(self, "fingerprint",
                   sum(col.width or 0 for col in COLUMNS if col.key != "fingerprint"))
