"""``file_watch`` triggers: an event per file added, modified or deleted under a folder.

:func:`watchfiles.awatch` (inotify/FSEvents/..., or polling) runs in a background task from
:meth:`FileWatchTrigger.start`; it debounces bursts, and each batch is reduced to one net change
per file. Events wait in a bounded backlog until the process asks for them.

Rules:

* ``watch_path`` is created if missing; everything is resolved, and anything whose real path is
  outside the real watch root (a symlink pointing elsewhere) is skipped; an event names the real
  file, so a symlink inside the root is reported (and pattern-matched) as its target;
* directories never produce events, and ``patterns`` (fnmatch) apply to the file name;
* only the changes listed in ``watch_events`` are kept;
* a full backlog counts ``dropped_events`` instead of growing.
"""

from __future__ import annotations

import asyncio
import contextlib
import fnmatch
import logging
import os
from collections import deque
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from watchfiles import Change, awatch

from runtime_core.triggers.base import TriggerEvent
from runtime_core.triggers.config import TriggerConfig

log = logging.getLogger(__name__)

DEFAULT_MAX_BACKLOG = 1000
#: How long stop() waits for the watcher thread to notice the stop event before cancelling it.
STOP_TIMEOUT = 5.0
#: Our change names -> the reference runtime's (its payload's ``event_type``).
REFERENCE_CHANGE_NAMES = {"added": "created", "modified": "modified", "deleted": "deleted"}
#: Directories remembered at start, so deleting one is not reported as a deleted file.
MAX_SCANNED_DIRS = 100_000


class FileWatchTrigger:
    """Runs on files added, changed or deleted under a folder. The runtime builds it as
    ``FileWatchTrigger(trigger_id, config)``; code written for the reference runtime as
    ``FileWatchTrigger(watch_path, patterns=None, events=None, recursive=True,
    debounce_seconds=0.5, poll_interval=1.0, *, trigger_id=None)`` (the id
    ``file_watch-<watch_path>`` when none is given; ``poll_interval`` is accepted and unused:
    changes come from the system's file notifications, through watchfiles)."""

    trigger_type = "file_watch"

    def __init__(self, first: str | os.PathLike[str],
                 second: TriggerConfig | list[str] | None = None,
                 events_: list[str] | None = None, /, *, patterns: list[str] | None = None,
                 events: list[str] | None = None, recursive: bool = True,
                 debounce_seconds: float = 0.5, poll_interval: float = 1.0,
                 trigger_id: str | None = None, max_backlog: int = DEFAULT_MAX_BACKLOG) -> None:
        if isinstance(second, TriggerConfig):  # ours: (trigger_id, config)
            trigger_id, config = str(first), second
        else:  # the reference's (watch_path, patterns, events, ...)
            found = patterns if patterns is not None else second
            changes = events if events is not None else events_
            config = TriggerConfig(type="file_watch", watch_path=os.fspath(first),
                                   patterns=found or ["*"],
                                   watch_events=changes or ["created", "modified"],
                                   recursive=recursive, debounce=debounce_seconds)
            trigger_id = trigger_id or f"file_watch-{os.fspath(first)}"
        del poll_interval  # the reference's polling backend's; watchfiles needs none
        if config.watch_path is None:
            raise ValueError("a 'file_watch' trigger needs 'watch_path'")
        if max_backlog < 1:
            raise ValueError(f"max_backlog must be at least 1, got {max_backlog}")
        self.trigger_id = trigger_id
        self.watch_path = Path(config.watch_path).expanduser()
        self.patterns = list(config.patterns)
        self.watch_events = frozenset(config.watch_events)
        self.recursive = config.recursive
        self.debounce_ms = max(0, round(config.debounce * 1000))
        self.max_backlog = max_backlog
        self.dropped_events = 0
        self.last_error: str | None = None
        self._backlog: deque[TriggerEvent] = deque()
        self._wakeup = asyncio.Event()
        self._root: Path | None = None
        self._known_dirs: set[Path] = set()
        self._task: asyncio.Task[None] | None = None
        self._stop_event: asyncio.Event | None = None
        self._running = False

    # -- lifecycle ---------------------------------------------------------------------------------
    async def start(self) -> None:
        if self._running:
            return
        await self._launch()
        self._running = True

    async def stop(self) -> None:
        self._running = False
        task, self._task = self._task, None
        if self._stop_event is not None:
            self._stop_event.set()  # the watcher thread checks it every step (50 ms)
        if task is None:
            return
        done, _ = await asyncio.wait({task}, timeout=STOP_TIMEOUT)
        if not done:
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)

    async def _launch(self) -> None:
        root = self.watch_path.resolve()
        try:
            root.mkdir(parents=True, exist_ok=True)
        except FileExistsError:
            raise NotADirectoryError(f"watch_path {str(root)!r} is not a directory") from None
        root = root.resolve()
        self._root = root
        self._known_dirs = _scan_dirs(root, self.recursive)
        stop = asyncio.Event()
        self._stop_event = stop
        task = asyncio.create_task(self._watch(root, stop),
                                   name=f"file-watch-{self.trigger_id}")
        task.add_done_callback(self._watcher_ended)
        self._task = task
        # awatch creates its OS watch synchronously in the task's first step: after one yield
        # it is in place (so nothing written after start() returns is missed), or has failed.
        await asyncio.sleep(0)
        if task.done() and not task.cancelled() and (exc := task.exception()) is not None:
            self._task = None
            raise OSError(f"cannot watch {str(root)!r}: {exc}") from exc

    async def _watch(self, root: Path, stop: asyncio.Event) -> None:
        async for changes in awatch(
            root, watch_filter=None, debounce=self.debounce_ms, stop_event=stop,
            recursive=self.recursive, ignore_permission_denied=True,
        ):
            self._handle(root, changes)

    def _watcher_ended(self, task: asyncio.Task[None]) -> None:
        if not task.cancelled() and (exc := task.exception()) is not None:
            self.last_error = f"{type(exc).__name__}: {exc}"
            log.warning("file watch %s on %s stopped: %s", self.trigger_id, self._root,
                        self.last_error)
        self._wakeup.set()  # let wait_for_next() notice and restart the watcher

    # -- events ------------------------------------------------------------------------------------
    async def wait_for_next(self) -> TriggerEvent:
        while True:
            if self._backlog:
                return self._backlog.popleft()
            task = self._task
            if self._running and (task is None or task.done()):
                # The watcher died on its own: report it once (the process's listener logs it
                # and backs off), then restart it on the next call.
                self._task = None
                if task is not None and not task.cancelled() and task.exception() is not None:
                    raise RuntimeError(f"file watch on {str(self._root)!r} stopped "
                                       f"({self.last_error}); it restarts on the next wait")
                await self._launch()
                continue
            self._wakeup.clear()
            await self._wakeup.wait()

    def pending(self) -> list[TriggerEvent]:
        """Events observed but not yet handed out (removed from the backlog)."""
        items = list(self._backlog)
        self._backlog.clear()
        return items

    def status(self) -> dict[str, Any]:
        status: dict[str, Any] = {
            "pending_events": len(self._backlog),
            "dropped_events": self.dropped_events,
            "watch_path": str(self._root or self.watch_path),
        }
        if self.last_error is not None:
            status["last_error"] = self.last_error
        return status

    def _handle(self, root: Path, changes: Iterable[tuple[Change, str]]) -> None:
        by_path: dict[str, set[Change]] = {}
        for change, raw in changes:
            by_path.setdefault(raw, set()).add(change)
        for raw in sorted(by_path):
            try:
                event = self._event_for(root, raw, by_path[raw])
            except Exception:  # one odd path must not end the watcher
                log.exception("file watch %s: cannot handle %r", self.trigger_id, raw)
                continue
            if event is None:
                continue
            if len(self._backlog) >= self.max_backlog:
                self.dropped_events += 1
                if self.dropped_events == 1 or self.dropped_events % 1000 == 0:
                    log.warning("file watch %s: backlog full (%d), %d event(s) dropped",
                                self.trigger_id, self.max_backlog, self.dropped_events)
                continue
            self._backlog.append(event)
            self._wakeup.set()
        if not root.is_dir():
            # The OS watch died with the folder: end the watcher; wait_for_next() reports it,
            # then re-creates the folder and watches it again.
            raise FileNotFoundError(f"watch_path {str(root)!r} was removed")

    def _event_for(self, root: Path, raw: str, kinds: set[Change]) -> TriggerEvent | None:
        try:
            path = Path(raw).resolve()
        except (OSError, RuntimeError):  # symlink loop
            return None
        if path == root or not path.is_relative_to(root):
            return None  # outside the root, e.g. through a symlink
        try:
            stat = path.stat()
        except OSError:
            stat = None
        if stat is not None and os.path.isdir(path):
            self._known_dirs.add(path)
            return None
        if stat is None:
            if path in self._known_dirs:
                self._known_dirs.discard(path)
                return None
            if Change.deleted not in kinds or Change.added in kinds:
                # Gone already: either created and removed within one window (nothing to
                # report), or its deletion is in the next batch.
                return None
            change = "deleted"
        else:
            change = "added" if Change.added in kinds else "modified"
        if change not in self.watch_events:
            return None
        if not any(fnmatch.fnmatch(path.name, pattern) for pattern in self.patterns):
            return None
        payload = {
            "path": path.relative_to(root).as_posix(),
            "absolute_path": str(path),
            "change": change,
            "size": None if stat is None else stat.st_size,
            # the reference runtime's names, so its filters carry over
            "filename": path.name,
            "event_type": REFERENCE_CHANGE_NAMES[change],
        }
        return TriggerEvent(self.trigger_id, "file_watch", payload,
                            metadata={"watch_path": str(root), "patterns": list(self.patterns)})


def _scan_dirs(root: Path, recursive: bool) -> set[Path]:
    """Real paths of the directories under ``root`` (bounded; symlinks are not followed)."""
    found: set[Path] = set()
    todo = [root]
    while todo and len(found) < MAX_SCANNED_DIRS:
        folder = todo.pop()
        with contextlib.suppress(OSError), os.scandir(folder) as entries:
            for entry in entries:
                with contextlib.suppress(OSError):
                    if entry.is_dir(follow_symlinks=False):
                        path = Path(entry.path)
                        found.add(path)
                        if recursive:
                            todo.append(path)
    return found
