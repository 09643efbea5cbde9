"""Cron triggers on a fake clock: exact fire times, seconds, time zones, validation."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime

import pytest
from pydantic import ValidationError

from runtime_core.clock import FakeClock
from runtime_core.config import TriggerConfig
from runtime_core.triggers.base import BaseTrigger, TriggerEvent
from runtime_core.triggers.cron import CronTrigger, validate_cron
from tests.helpers.polling import settle, wait_for

NEW_YEAR = datetime(2026, 1, 1, tzinfo=UTC).timestamp()  # 2026-01-01T00:00:00Z


async def waiting(clock: FakeClock, trigger: CronTrigger) -> asyncio.Task[TriggerEvent]:
    """Start one wait_for_next and return once it sleeps on the clock."""
    task = asyncio.create_task(trigger.wait_for_next())
    await wait_for(lambda: clock.sleepers == 1, what="the trigger to sleep")
    return task


async def advance_to_fire(clock: FakeClock, task: asyncio.Task[TriggerEvent],
                          seconds: float) -> TriggerEvent:
    """Advance ``seconds`` - 1 (must not fire), then 1 more (must fire)."""
    clock.advance(seconds - 1)
    await wait_for(lambda: clock.sleepers == 1 or task.done(), what="the trigger to re-sleep")
    await settle()
    assert not task.done(), "fired early"
    clock.advance(1)
    return await asyncio.wait_for(task, 5)


async def test_every_five_minutes_fires_at_05_and_10_exactly() -> None:
    clock = FakeClock(wall_start=NEW_YEAR)
    trigger = CronTrigger("cron-1", "*/5 * * * *", None, clock)
    assert isinstance(trigger, BaseTrigger)
    await trigger.start()

    first = await advance_to_fire(clock, await waiting(clock, trigger), 300)
    assert clock.time() == NEW_YEAR + 300
    assert first.trigger_id == "cron-1"
    assert first.trigger_type == "cron"
    assert first.payload == {"scheduled_time": "2026-01-01T00:05:00+00:00",
                             "cron_expression": "*/5 * * * *", "timezone": "UTC"}

    second = await advance_to_fire(clock, await waiting(clock, trigger), 300)
    assert clock.time() == NEW_YEAR + 600
    assert second.payload["scheduled_time"] == "2026-01-01T00:10:00+00:00"
    await trigger.stop()


async def test_missed_fire_times_are_not_replayed() -> None:
    clock = FakeClock(wall_start=NEW_YEAR)
    trigger = CronTrigger("cron-1", "*/5 * * * *", None, clock)
    task = await waiting(clock, trigger)
    clock.advance(20 * 60 + 30)  # 00:20:30: the :05, :10, :15 and :20 slots have all passed
    late = await asyncio.wait_for(task, 5)
    assert late.payload["scheduled_time"] == "2026-01-01T00:05:00+00:00"  # the one it awaited
    following = await advance_to_fire(clock, await waiting(clock, trigger), 270)
    assert following.payload["scheduled_time"] == "2026-01-01T00:25:00+00:00"


async def test_a_sixth_field_counts_seconds() -> None:
    clock = FakeClock(wall_start=NEW_YEAR + 3)
    trigger = CronTrigger("cron-s", "* * * * * */10", None, clock)
    fired = await advance_to_fire(clock, await waiting(clock, trigger), 7)
    assert fired.payload["scheduled_time"] == "2026-01-01T00:00:10+00:00"
    fired = await advance_to_fire(clock, await waiting(clock, trigger), 10)
    assert fired.payload["scheduled_time"] == "2026-01-01T00:00:20+00:00"


async def test_time_zone_with_an_offset() -> None:
    clock = FakeClock(wall_start=NEW_YEAR)  # 01:00 in Paris (UTC+1 in winter)
    trigger = CronTrigger("cron-tz", "0 9 * * *", "Europe/Paris", clock)
    fired = await advance_to_fire(clock, await waiting(clock, trigger), 8 * 3600)
    assert fired.payload == {"scheduled_time": "2026-01-01T09:00:00+01:00",
                             "cron_expression": "0 9 * * *", "timezone": "Europe/Paris"}


async def test_daylight_saving_time_is_followed() -> None:
    # 2026-03-29 is the spring change in Paris: 09:00 local is 07:00Z that day.
    clock = FakeClock(wall_start=datetime(2026, 3, 29, tzinfo=UTC).timestamp())
    trigger = CronTrigger("cron-dst", "0 9 * * *", "Europe/Paris", clock)
    fired = await advance_to_fire(clock, await waiting(clock, trigger), 7 * 3600)
    assert fired.payload["scheduled_time"] == "2026-03-29T09:00:00+02:00"


class EarlyClock:
    """A wall clock whose sleeps end 1 ms early, as a real event loop's may."""

    def __init__(self, start: float) -> None:
        self.now = start

    def monotonic(self) -> float:
        return self.now

    def time(self) -> float:
        return self.now

    async def sleep(self, seconds: float) -> None:
        self.now += max(seconds - 0.001, 0.0005)
        await asyncio.sleep(0)


async def test_an_early_wake_up_neither_fires_early_nor_twice() -> None:
    clock = EarlyClock(NEW_YEAR)
    trigger = CronTrigger("cron-1", "*/5 * * * *", None, clock)
    slots = []
    for _ in range(3):
        fired = await asyncio.wait_for(trigger.wait_for_next(), 5)
        slots.append(fired.payload["scheduled_time"])
        assert clock.time() >= datetime.fromisoformat(slots[-1]).timestamp()
    assert slots == ["2026-01-01T00:05:00+00:00", "2026-01-01T00:10:00+00:00",
                     "2026-01-01T00:15:00+00:00"]


@pytest.mark.parametrize("expression", [
    "*/5 * * * *", "0 9 * * 1-5", "0 0 L * *", "30 6 1 jan *", "* * * * * */10", " 0 * * * * ",
])
def test_valid_expressions(expression: str) -> None:
    validate_cron(expression, "America/New_York")
    TriggerConfig(type="cron", cron_expression=expression, timezone="Asia/Kolkata")


@pytest.mark.parametrize(("expression", "fragment"), [
    ("* * * *", "expected 5 fields 'minute hour day month weekday' or 6 with trailing seconds"),
    ("* * * * * * *", "expected 5 fields"),
    ("@hourly", "expected 5 fields"),
    ("", "expected 5 fields"),
    ("61 * * * *", "invalid cron expression '61 * * * *'"),
    ("*/0 * * * *", "invalid cron expression"),
    ("a b c d e", "invalid cron expression 'a b c d e'"),
    ("0 0 30 2 *", "invalid cron expression '0 0 30 2 *'"),  # never fires
])
def test_bad_expressions_fail_config_validation(expression: str, fragment: str) -> None:
    with pytest.raises(ValidationError) as caught:
        TriggerConfig(type="cron", cron_expression=expression)
    assert fragment in str(caught.value)
    with pytest.raises(ValueError, match="invalid cron expression"):
        CronTrigger("c", expression, None, FakeClock())


@pytest.mark.parametrize("zone", ["Mars/Olympus", "Europe", "../etc/passwd", "", "utc+2"])
def test_bad_time_zones_fail_config_validation(zone: str) -> None:
    with pytest.raises(ValidationError) as caught:
        TriggerConfig(type="cron", cron_expression="* * * * *", timezone=zone)
    assert f"unknown time zone {zone!r}: use an IANA name such as Europe/Paris" \
        in str(caught.value)
    with pytest.raises(ValueError, match="unknown time zone"):
        validate_cron("* * * * *", zone)
