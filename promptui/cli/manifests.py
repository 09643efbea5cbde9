"""``promptui validate`` and ``promptui init``."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import typer
from rich.markup import escape

from promptui.cli.options import wrapped as out

_HEADER = """\
# A promptui process. Validate with: promptui validate {file}
# Run it headless with:            promptui run {file}
version: "1.0"
name: {name}
instructions: {instructions}
"""

TEMPLATES: dict[str, str] = {
    "basic": _HEADER + """\
model: echo            # offline: replies with a summary of each event
triggers:
  - type: manual       # events come from 'inject' (or add a cron/webhook trigger)
""",
    "cron": _HEADER + """\
model:
  provider: scripted
  turns:
    - reply: Nightly report written.
triggers:
  - type: cron
    cron_expression: "0 2 * * *"     # minute hour day month weekday (6th field: seconds)
    timezone: Europe/Paris
world:
  reports_written: 0
""",
    "webhook": _HEADER + """\
model: echo
triggers:
  - type: webhook
    webhook_host: 127.0.0.1
    webhook_port: ${{WEBHOOK_PORT:-8787}}
    webhook_path: /events
    hmac_secret: ${{WEBHOOK_SECRET:-change-me}}   # senders sign with HMAC-SHA256
    filter_expression: payload.severity in ["high", "critical"]
""",
    "file_watch": _HEADER + """\
model: echo
triggers:
  - type: file_watch
    watch_path: ./inbox
    patterns: ["*.csv", "*.json"]
    watch_events: [added, modified]
    debounce: 0.5
""",
    "full": _HEADER + """\
model:
  provider: scripted
  turns:
    - tool_calls:
        - {{name: dumps, args: {{obj: $payload}}}}
    - reply: Done.
tools:
  - {{path: "json:dumps", effect: read}}
triggers:
  - {{type: interval, seconds: 60}}
  - {{type: cron, cron_expression: "*/15 * * * *"}}
  - {{type: event, event_type: deploy.finished}}
  - {{type: message, topic: "reports.*"}}
world:
  seen: 0
journal:
  level: checkpoint
  path: .promptui/journal.db
config:
  concurrency: 1
  restart_policy: on_failure
  max_restarts: 5
  restart_backoff: 2
  trigger_delivery: {{max_retries: 2, retry_backoff: 1}}
  run_budget: {{max_model_calls: 10, max_tool_calls: 20}}
""",
}


def validate(
    paths: list[Path] = typer.Argument(..., help="Manifest files or folders."),
    connect: bool = typer.Option(False, "--connect",
                                 help="Also connect each MCP server and list its tools."),
    imports: bool = typer.Option(True, "--imports/--no-imports",
                                 help="Import each tool's module in a child process, as a "
                                 "start would (--no-imports: don't run their code)."),
    import_timeout: float = typer.Option(10.0, "--import-timeout", min=0.1, max=600,
                                         metavar="SECONDS",
                                         help="How long a tool module may take to import."),
) -> None:
    """Check manifests; every problem is listed with file, line, column and field: the text,
    then what would fail at start (tool imports, script files, watch paths, webhook ports)."""
    from runtime_core.manifest.loader import (
        Manifest,
        ManifestError,
        check_start,
        load_directory,
        load_manifest,
    )

    problems = 0
    loaded: list[Manifest] = []
    for path in paths:
        try:
            loaded.extend(load_directory(path) if path.is_dir() else [load_manifest(path)])
        except ManifestError as exc:
            for problem in exc.problems:
                out.print(f"[red]error[/red] {escape(str(problem))}")
            problems += len(exc.problems)
    reports = check_start(loaded, imports=imports, import_timeout=import_timeout)
    for manifest, report in zip(loaded, reports, strict=True):
        for problem in report.errors:
            out.print(f"[red]error[/red] {escape(str(problem))}")
        problems += len(report.errors)
        if not report.errors:
            out.print(f"[green]ok[/green] {escape(manifest.name)} ({escape(str(manifest.path))})")
        for warning in manifest.warnings:
            out.print(f"[yellow]warning[/yellow] {escape(warning)}")
        for note in manifest.notes:  # how a reference-runtime manifest is read here
            out.print(f"[cyan]note[/cyan] {escape(note)}")
        for problem in report.warnings:
            out.print(f"[yellow]warning[/yellow] {escape(str(problem))}")
        if connect and manifest.config.servers:
            problems += _probe(manifest.config.servers, manifest.base_dir)
    if problems:
        out.print(f"{problems} problem(s)")
        raise typer.Exit(1)


def _probe(servers: Any, base_dir: Path) -> int:
    """Connect the servers, print their tools with effects; the number that failed."""
    import asyncio

    from runtime_core.control.offline import probe_servers

    failed = 0
    for row in asyncio.run(probe_servers(servers, base_dir=base_dir)):
        name = escape(f"servers.{row['server']}")
        if row.get("error"):
            failed += 1
            out.print(f"  [red]error[/red] {name}: {escape(row['error'])}")
            continue
        tools = ", ".join(
            f"{t['name']} ({t['effect']}{', idempotent' if t.get('idempotent') else ''})"
            for t in row["tools"]) or "no tools"
        out.print(f"  [green]connected[/green] {name} ({row['type']}): {escape(tools)}")
        _probe_extras(row)
    return failed


def _probe_extras(row: dict[str, Any]) -> None:
    """What a server lists besides the tools offered: tools left out, resources."""
    for tool in row.get("skipped", []):
        out.print(f"    skipped: {escape(tool['reason'])}: {escape(tool['name'])}")
    if "resources" in row:
        listed = [r["uri"] + (f" ({r['mime_type']})" if r.get("mime_type") else "")
                  for r in row["resources"]] + row.get("resource_templates", [])
        out.print(f"    resources: {escape(', '.join(listed) or 'none listed')}")
    if row.get("resources_error"):
        out.print(f"    [yellow]resources could not be listed[/yellow]: "
                  f"{escape(row['resources_error'])}")


def init(
    template: str = typer.Option("basic", "--template", "-t",
                                 help=f"One of: {', '.join(TEMPLATES)}."),
    output: Path = typer.Option(Path("agent.agent"), "-o", "--output", help="File to write."),
    name: str = typer.Option("", "--name", help="Process name (default: from the file name)."),
    force: bool = typer.Option(False, "--force", help="Overwrite an existing file."),
) -> None:
    """Write a starter manifest (never overwrites without --force)."""
    if template not in TEMPLATES:
        out.print(f"[red]error[/red] unknown template {template!r}; choose from "
                  f"{', '.join(TEMPLATES)}")
        raise typer.Exit(2)
    if output.exists() and not force:
        out.print(f"[red]error[/red] {escape(str(output))} exists; pass --force to overwrite it")
        raise typer.Exit(1)
    process_name = name or output.stem.replace(".", "-") or "my-agent"
    text = TEMPLATES[template].format(file=output, name=process_name,
                                      instructions=f"A {template} agent.")
    output.parent.mkdir(parents=True, exist_ok=True)
    output.write_text(text, encoding="utf-8")
    out.print(f"wrote {escape(str(output))} ({template}); next: promptui validate {output}")
