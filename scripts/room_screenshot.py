"""Draw the control room on the bundled demo as docs/images/room.svg, the picture the README
and the docs' home page show.

    .venv/bin/python scripts/room_screenshot.py            # write docs/images/room.svg
    .venv/bin/python scripts/room_screenshot.py --check    # exit 1 if the file is stale

The room is the real one (promptui.app.ControlRoom, the bundled themes, 120x40), drawn by
Textual's own SVG export. What it shows is a frozen scene of the demo rather than a live run:
the demo's seven processes, as its manifests name them, about half a minute after
``promptui`` was started and once killed in the middle of an invoice (flaky-deployer has dead
letters, looper was paused by its health monitor, invoice-watcher has a run waiting for an
operator). A live run would draw other counts, ids and times on every capture; the scene has a
fixed clock (2026-05-28 20:26:40 UTC) and fixed data, so the same code draws the same bytes,
and tests/docs/test_room_picture.py redraws it and compares.

The scene's control plane is the snapshot tests' (tests/helpers/scenes.py), with the demo's
processes and events in place of the snapshot scene's, so run this from a clone of the
repository.
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:  # run as a script: the scene lives in the repository's tests/
    sys.path.insert(0, str(ROOT))

from promptui.app import ControlRoom  # noqa: E402
from promptui.themes import load_themes  # noqa: E402
from runtime_core.control.views import ProcessSummary  # noqa: E402
from runtime_core.events import (  # noqa: E402
    EventDeadLettered,
    HealthAnomaly,
    ProcessStateChanged,
    RunFinished,
    RunStarted,
    RuntimeEvent,
    RunWaiting,
)
from tests.helpers.scenes import NO_USER_THEMES, NOW, SceneControl, summary  # noqa: E402
from tests.helpers.snapshots import utc_zone  # noqa: E402

PICTURE = ROOT / "docs" / "images" / "room.svg"
DEMO = ROOT / "demo_manifests"
SIZE = (120, 40)
TITLE = "promptui"
SELECTED = 5  # rows down from the first: invoice-watcher, whose run waits

SPAN = 30.0  # seconds of the demo the scene plays, ending at NOW
TICK = 0.5  # the room's pump, as at 2 Hz: one tick per half second of the scene
REFUSED = "deploy target refused the connection"


def _hex_id(seed: str) -> str:
    """An id that looks like the runtime's and is the same on every drawing."""
    return hashlib.sha256(seed.encode()).hexdigest()[:12]


def _run(out: list[RuntimeEvent], process: str, at: float, n: int, trigger: str,
         reply: str = "", error: str = "") -> None:
    run_id = _hex_id(f"{process} {n}")
    out.append(RunStarted(process=process, timestamp=at - 0.3, run_id=run_id,
                          event_id=f"e-{run_id}", trigger_type=trigger, attempt=1))
    out.append(RunFinished(process=process, timestamp=at, run_id=run_id,
                           event_id=f"e-{run_id}", state="failed" if error else "succeeded",
                           reason="model" if error else "", error=error, reply=reply,
                           duration_ms=300.0))


def demo_events() -> list[RuntimeEvent]:
    """The demo's last half minute, oldest first, as its manifests make it behave: the feeder
    drops an invoice and asks for a deploy every 4 s; invoice-watcher books each invoice,
    changelog writes each deploy down, flaky-deployer fails every other build (a retry, then a
    dead letter); health-checker checks every 3 s; looper gets stuck and its health monitor
    pauses it; one alert came in by webhook. The runtime was killed during a booking before
    this half minute began: that run waits for an operator."""
    start = NOW - SPAN
    out: list[RuntimeEvent] = [
        RunWaiting(process="invoice-watcher", timestamp=start + 0.5, run_id="8586af5e0d41",
                   event_id="e-8586af5e0d41", reason="unknown_write_outcome",
                   tool="record_invoice")]
    for n, at in enumerate(range(int(start) + 2, int(NOW), 3)):
        _run(out, "health-checker", at + 0.4, n, "interval", "API is up.")
    for n, at in enumerate(range(int(start) + 1, int(NOW), 4)):
        _run(out, "demo-feeder", at + 0.3, n, "interval", "Fed the demo.")
        _run(out, "invoice-watcher", at + 1.9, n, "file_watch", "Invoice booked.")
        _run(out, "changelog", at + 1.2, n, "event", "Changelog updated.")
        if n % 2:  # a broken build: the run fails, its retry fails, a dead letter
            _run(out, "flaky-deployer", at + 0.8, 2 * n, "event", error=REFUSED)
            _run(out, "flaky-deployer", at + 1.6, 2 * n + 1, "event", error=REFUSED)
            out.append(EventDeadLettered(process="flaky-deployer", timestamp=at + 1.6,
                                         event_id=_hex_id(f"deploy {n}"), trigger_type="event",
                                         reason="retries exhausted", error=REFUSED,
                                         attempts=2))
        else:
            _run(out, "flaky-deployer", at + 0.8, 2 * n, "event", "Deployed.")
    _run(out, "looper", start + 3.9, 0, "interval", error="run budget: max_model_calls 6")
    out.append(HealthAnomaly(process="looper", timestamp=start + 9.2, anomaly_type="stuck",
                             description="Agent stuck: tool 'check_health' called 3 times "
                                         "with identical arguments",
                             details={"tool_name": "check_health", "consecutive_count": 3}))
    out.append(ProcessStateChanged(process="looper", timestamp=start + 9.2,
                                   from_state="running", to_state="suspended",
                                   reason="health"))
    _run(out, "alert-handler", start + 12.6, 0, "webhook", "Paged on-call: disk full on db-1")
    return sorted(out, key=lambda e: e.timestamp)


def demo_rows(events: list[RuntimeEvent], now: float) -> list[ProcessSummary]:
    """The table at ``now``: counts from the events so far."""
    rows = []
    for name in demo_names():
        mine = [e for e in events if e.process == name and e.timestamp <= now]
        finished = [e for e in mine if isinstance(e, RunFinished)]
        failures = 0
        for run in finished:
            failures = failures + 1 if run.state == "failed" else 0
        suspended = any(isinstance(e, ProcessStateChanged) for e in mine)
        ticks_since = int((now - (NOW - SPAN + 9.2)) // 6) if suspended else 0
        rows.append(summary(
            name, "suspended" if suspended else "running",
            suspend_reason="health" if suspended else "",
            queue_depth=ticks_since if name == "looper" else 0,
            invocations=sum(1 for r in finished if r.state == "succeeded"),
            failure_streak=failures,
            dead_letters=sum(1 for e in mine if isinstance(e, EventDeadLettered)),
            waiting_runs=sum(1 for e in mine if isinstance(e, RunWaiting)),
            health="1 anomaly" if any(isinstance(e, HealthAnomaly) for e in mine) else "off",
            last_run_at=finished[-1].timestamp if finished else None,
            last_outcome=(finished[-1].reply or finished[-1].error) if finished else ""))
    return rows


def demo_names() -> list[str]:
    """The demo's process names, read from its manifests (the scene shows those)."""
    names = []
    for path in sorted(DEMO.glob("*.agent")):
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
        names.append(str(data["name"]))
    return sorted(names)


class _Ticker:
    """The scene's clock: moved by the capture, half a second per pump."""

    def __init__(self) -> None:
        self.now = NOW - SPAN

    def __call__(self) -> float:
        return self.now


class _TimedStream:
    """The room's event subscription, handing out the events up to the scene's clock."""

    def __init__(self, events: list[RuntimeEvent], clock: _Ticker) -> None:
        self._events = list(events)
        self._clock = clock
        self.dropped = 0

    def drain(self, limit: int | None = None) -> list[RuntimeEvent]:
        due = [e for e in self._events if e.timestamp <= self._clock.now]
        self._events = self._events[len(due):]
        return due

    def close(self) -> None:
        pass


class DemoScene(SceneControl):
    """The snapshot scene's frozen control plane, showing the demo's half minute."""

    def __init__(self, clock: _Ticker) -> None:
        super().__init__()
        self.clock = clock
        self.events = demo_events()

    @property
    def name(self) -> str:
        return "demo"

    def subscribe(self, maxsize: int = 10_000) -> Any:
        return _TimedStream(self.events, self.clock)

    async def list_processes(self) -> list[ProcessSummary]:
        return demo_rows(self.events, self.clock.now)


def scene_room() -> tuple[ControlRoom, _Ticker]:
    """The room over the demo scene (the bundled themes only, the default one), its clock
    moved by hand and pumped by hand."""
    themes, _ = load_themes(NO_USER_THEMES)
    clock = _Ticker()
    room = ControlRoom(DemoScene(clock), themes=themes, clock=clock, monotonic=clock,
                       autopump=False, start_runtime=False)
    return room, clock


@dataclass(frozen=True)
class Capture:
    """One drawing of the room: Textual's SVG export and the screen as plain text."""

    svg: str
    text: str


async def capture(size: tuple[int, int] = SIZE) -> Capture:
    """Draw the room on the demo scene at ``size``."""
    with utc_zone():
        app, clock = scene_room()
        async with app.run_test(size=size) as pilot:
            await pilot.pause()
            while clock.now < NOW:  # play the half minute, one pump per tick
                clock.now = min(NOW, clock.now + TICK)
                await app.pump()
            await pilot.press(*["down"] * SELECTED)
            await app.pump()
            for _ in range(3):  # the logs scroll to their newest line a frame or two later
                await pilot.pause()
            svg = app.export_screenshot(title=TITLE)
            text = "\n".join(strip.text.rstrip()
                             for strip in app.screen._compositor.render_strips())
            app.exit()
    return Capture(svg, text)


def main(argv: list[str] | None = None) -> int:
    """Write the picture, or with --check say whether the committed one is current."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("-o", "--output", type=Path, default=PICTURE,
                        help=f"where to write the SVG (default {PICTURE.relative_to(ROOT)})")
    parser.add_argument("--check", action="store_true",
                        help="write nothing; exit 1 if the file differs from a fresh drawing")
    args = parser.parse_args(argv)
    drawn = asyncio.run(capture())
    if args.check:
        current = args.output.read_text(encoding="utf-8") if args.output.exists() else ""
        if current != drawn.svg:
            print(f"{args.output} is stale: run .venv/bin/python scripts/room_screenshot.py",
                  file=sys.stderr)
            return 1
        print(f"{args.output} is current")
        return 0
    args.output.parent.mkdir(parents=True, exist_ok=True)
    args.output.write_text(drawn.svg, encoding="utf-8")
    print(f"wrote {args.output} ({len(drawn.svg):,} bytes)")
    print(drawn.text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
