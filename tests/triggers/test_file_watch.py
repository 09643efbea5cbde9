"""File-watch triggers on real files (tmp_path): changes, filters, symlinks, backlog, stop."""

from __future__ import annotations

import asyncio
import os
import shutil
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest

from runtime_core.config import TriggerConfig
from runtime_core.triggers.base import BaseTrigger, TriggerEvent
from runtime_core.triggers.file_watch import FileWatchTrigger
from tests.helpers.polling import settle, wait_for

TIMEOUT = 10.0


def make(root: Path, *, max_backlog: int = 1000, **fields: Any) -> FileWatchTrigger:
    config = TriggerConfig(type="file_watch", watch_path=str(root), debounce=0.05, **fields)
    return FileWatchTrigger("fw-1", config, max_backlog=max_backlog)


@asynccontextmanager
async def running(trigger: FileWatchTrigger) -> AsyncIterator[FileWatchTrigger]:
    await trigger.start()
    try:
        yield trigger
    finally:
        await trigger.stop()


async def next_event(trigger: FileWatchTrigger) -> TriggerEvent:
    return await asyncio.wait_for(trigger.wait_for_next(), TIMEOUT)


async def test_added_modified_deleted(tmp_path: Path) -> None:
    root = tmp_path / "inbox"  # missing: start() creates it
    trigger = make(root)
    assert isinstance(trigger, BaseTrigger)
    async with running(trigger):
        assert root.is_dir()
        real_root = root.resolve()
        (root / "a.txt").write_text("hello")
        added = await next_event(trigger)
        assert added.trigger_id == "fw-1"
        assert added.trigger_type == "file_watch"
        assert added.payload == {"path": "a.txt", "absolute_path": str(real_root / "a.txt"),
                                 "change": "added", "size": 5, "filename": "a.txt",
                                 "event_type": "created"}

        (root / "a.txt").write_text("hello, world")
        modified = await next_event(trigger)  # not a second "added"
        assert modified.payload["change"] == "modified"
        assert modified.payload["size"] == 12

        (root / "a.txt").unlink()
        deleted = await next_event(trigger)
        assert deleted.payload == {"path": "a.txt", "absolute_path": str(real_root / "a.txt"),
                                   "change": "deleted", "size": None, "filename": "a.txt",
                                   "event_type": "deleted"}
        assert trigger.status() == {"pending_events": 0, "dropped_events": 0,
                                    "watch_path": str(real_root)}


async def test_nested_paths_are_relative_posix(tmp_path: Path) -> None:
    (tmp_path / "sub" / "deeper").mkdir(parents=True)
    async with running(make(tmp_path)) as trigger:
        (tmp_path / "sub" / "deeper" / "r.csv").write_text("1,2")
        event = await next_event(trigger)
        assert event.payload["path"] == "sub/deeper/r.csv"
        assert event.payload["change"] == "added"


async def test_not_recursive_ignores_subfolders(tmp_path: Path) -> None:
    (tmp_path / "sub").mkdir()
    async with running(make(tmp_path, recursive=False)) as trigger:
        (tmp_path / "sub" / "hidden.txt").write_text("x")
        (tmp_path / "top.txt").write_text("x")
        assert (await next_event(trigger)).payload["path"] == "top.txt"
        assert trigger.pending() == []


async def test_patterns_filter_file_names(tmp_path: Path) -> None:
    async with running(make(tmp_path, patterns=["*.csv", "report-*"])) as trigger:
        (tmp_path / "notes.txt").write_text("skip me")
        (tmp_path / "data.csv").write_text("1,2")
        (tmp_path / "report-1.pdf").write_text("%PDF")
        seen = {(await next_event(trigger)).payload["path"] for _ in range(2)}
        assert seen == {"data.csv", "report-1.pdf"}
        assert trigger.pending() == []


async def test_directories_never_produce_events(tmp_path: Path) -> None:
    (tmp_path / "old").mkdir()
    async with running(make(tmp_path)) as trigger:
        (tmp_path / "new").mkdir()
        (tmp_path / "new").rmdir()
        (tmp_path / "old").rmdir()  # existed before start
        (tmp_path / "marker.txt").write_text("x")
        marker = await next_event(trigger)
        assert marker.payload["path"] == "marker.txt"
        assert trigger.pending() == []


async def test_watch_events_keeps_only_the_listed_changes(tmp_path: Path) -> None:
    (tmp_path / "a.txt").write_text("before start")
    async with running(make(tmp_path, watch_events=["deleted"])) as trigger:
        (tmp_path / "b.txt").write_text("added: not wanted")
        (tmp_path / "a.txt").write_text("modified: not wanted")
        (tmp_path / "a.txt").unlink()
        deleted = await next_event(trigger)
        assert (deleted.payload["path"], deleted.payload["change"]) == ("a.txt", "deleted")
        assert trigger.pending() == []


async def test_files_outside_the_root_through_a_symlink_are_ignored(tmp_path: Path) -> None:
    root, outside = tmp_path / "root", tmp_path / "outside"
    root.mkdir()
    outside.mkdir()
    os.symlink(outside, root / "link")  # the OS watcher follows this into outside/
    async with running(make(root)) as trigger:
        (outside / "secret.txt").write_text("outside")
        (root / "link" / "through.txt").write_text("outside, written through the link")
        os.symlink(outside / "secret.txt", root / "alias.txt")  # a file symlink leading out
        (root / "marker.txt").write_text("inside")
        marker = await next_event(trigger)
        assert marker.payload["path"] == "marker.txt"
        assert trigger.pending() == []


async def test_a_full_backlog_counts_dropped_events(tmp_path: Path) -> None:
    async with running(make(tmp_path, max_backlog=3)) as trigger:
        for number in range(7):
            (tmp_path / f"f{number}.txt").write_text(str(number))
        await wait_for(lambda: trigger.status()["dropped_events"] == 4, timeout=TIMEOUT,
                       what="4 dropped events")
        assert trigger.status()["pending_events"] == 3
        held = trigger.pending()
        assert [event.payload["change"] for event in held] == ["added"] * 3
        assert trigger.status()["pending_events"] == 0
        assert trigger.status()["dropped_events"] == 4


async def test_stop_ends_the_watcher_promptly_and_start_again_works(tmp_path: Path) -> None:
    trigger = make(tmp_path)
    await trigger.start()
    watcher = trigger._task
    assert watcher is not None and not watcher.done()
    started = time.monotonic()
    await trigger.stop()
    assert watcher.done()
    assert time.monotonic() - started < 2.0
    async with running(trigger):
        (tmp_path / "again.txt").write_text("x")
        assert (await next_event(trigger)).payload["path"] == "again.txt"
    assert trigger._task is None


async def test_a_removed_watch_root_is_reported_then_watched_again(tmp_path: Path) -> None:
    root = tmp_path / "root"
    async with running(make(root)) as trigger:
        shutil.rmtree(root)
        with pytest.raises(RuntimeError, match="was removed"):
            await next_event(trigger)
        assert "was removed" in trigger.status()["last_error"]
        waiter = asyncio.create_task(next_event(trigger))  # re-creates and re-watches root
        await wait_for(lambda: trigger._task is not None and root.is_dir(), timeout=TIMEOUT)
        await settle()
        (root / "back.txt").write_text("x")
        assert (await waiter).payload["path"] == "back.txt"


async def test_a_watch_path_that_is_a_file_fails_start(tmp_path: Path) -> None:
    (tmp_path / "file").write_text("x")
    with pytest.raises(NotADirectoryError, match="not a directory"):
        await make(tmp_path / "file").start()
