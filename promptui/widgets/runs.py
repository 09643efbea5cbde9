"""A run in words: its header, its steps, what it executes and how it ended. The live log, the
runs table and the run's steps dialog all write a run through these."""

from __future__ import annotations

from rich.text import Text

from promptui.format import clip, compact, elapsed
from runtime_core.control.views import RunView, StepView

RUN_STATE_STYLES = {
    "waiting": "bold red",
    "running": "bold cyan",
    "queued": "cyan",
    "succeeded": "green",
    "failed": "red",
    "cancelled": "dim",
}


def duration(run: RunView, now: float) -> str:
    """How long the run took, or has been running at ``now``."""
    if run.started_at is None:
        return "-"
    return elapsed((run.finished_at if run.finished_at is not None else now) - run.started_at)


def run_outcome(run: RunView) -> str:
    """Why a run is where it is, in a few words: the waiting write, the error, the reply."""
    if run.state == "waiting":
        return " ".join(p for p in (run.waiting_reason, run.write_in_flight or
                                    run.missing_evidence) if p)
    if run.error or run.reason:
        return ": ".join(p for p in (run.reason, run.error) if p)
    return run.reply


def step_line(step: StepView) -> Text:
    line = Text(f"  {step.index:>2} ")
    if step.kind == "tool":
        mark = ("✓", "green") if step.ok else ("✗", "red")
        line.append("tool  ", style="magenta")
        line.append(f"{step.name}({clip(compact(step.args), 120)}) → ")
        line.append(f"{mark[0]} ", style=mark[1])
        line.append(clip(step.result, 200))
    elif step.kind in ("elicitation", "sampling"):  # what an MCP server asked during a call
        line.append(f"{step.kind} ", style="yellow")
        line.append(f"{step.name}: {clip(step.result, 200)}")
    elif step.kind == "refused":
        line.append("refused ", style="bold yellow")
        line.append(f"{step.name}: {clip(step.result, 200)}")
    else:
        line.append("model ", style="cyan")
        line.append(clip(step.result, 200) or "(no text)", style="" if step.ok else "red")
    line.append(f"  {step.duration_ms:.0f}ms", style="dim")
    return line


def run_header(run: RunView) -> Text:
    text = Text("▶ ", style="bold")
    text.append(f"run {run.run_id[:8]}", style="bold")
    text.append(f" · {run.trigger_type} · event {run.event_id[:8]} · attempt {run.attempt}",
                style="dim")
    if run.trace_id:  # whole: it is what a tracing backend is searched by
        text.append(f"\n  trace {run.trace_id}", style="dim")
    return text


def identity_lines(run: RunView) -> Text:
    """What the run executes, frozen at its start; a changed configuration stands out."""
    text = Text()
    ident = run.identity
    if ident:
        tools = ident.get("policy", {}).get("tools", {})
        text.append(f"  profile {ident.get('profile', '')}@{ident.get('version', '')}"
                    f" · completion {ident.get('evaluator', '')}"
                    f" · config {ident.get('config_digest', '')}", style="dim")
        if tools:
            text.append("\n  policy " + ", ".join(f"{k} ({v})" for k, v in tools.items()),
                        style="dim")
        budget = ident.get("budget") or {}
        if budget:
            text.append("\n  budget " + ", ".join(f"{k}={v}" for k, v in budget.items()),
                        style="dim")
    if run.config_changed:
        text.append(("\n" if text else "") + f"  ⚠ resumed under another configuration: "
                    f"{run.config_changed}", style="bold yellow")
    return text


def run_end(run: RunView) -> Text:
    if run.state == "succeeded":
        return Text(f"  ✓ reply: {clip(run.reply, 400)}", style="green")
    if run.state == "waiting":
        return Text(f"  ⏸ waiting: {run_outcome(run)}", style="bold red")
    style = "dim" if run.state == "cancelled" else "red"
    return Text(f"  ✗ {run.state}: {clip(run_outcome(run), 400)}", style=style)
