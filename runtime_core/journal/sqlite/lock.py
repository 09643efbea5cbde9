"""Taking a journal file for writing: its path checked, its folder made, and one writer held.

SQLite lets two OS processes write one file, but each journal object keeps its own seq heads,
so a second runtime on the same file makes the first one's appends collide (and then refuse
everything). The writer therefore holds an OS advisory lock, ``flock`` on a side file
``<journal>.lock``, for as long as the journal is open. The kernel drops it when the holder's
file is closed or the holder dies, even by SIGKILL, so a dead runtime never blocks the next
start. The holder writes its pid, host and start time into the lock file, for the message the
next one gets, and removes the file when it closes (a dead holder leaves it behind, and the next
start takes it over). Readers (``promptui logs``, ``status``, ``journal verify``) open SQLite
read-only and never take the lock.

The files are private to their user: the journal holds payloads (and prompts at level
``full``), so it is created 0600 before SQLite opens it (its -wal and -shm take its mode), and
an older one left readable by others is tightened when a writer opens it (said in the log). The
lock file is opened without following a symbolic link, and a folder that other users can write
(group or other, without the sticky bit of /tmp) is refused, as ssh refuses a loose key: in it
another user could swap the journal's files or plant links.

flock belongs to an open file, not to a process: a second journal object on the same file in
the same OS process is refused too. One object per file is the rule (AgentRuntime gives the
processes that share a file one journal), since each object counts seqs on its own.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import json
import logging
import os
import socket
import stat
import time
from dataclasses import dataclass
from pathlib import Path

from runtime_core.journal.provider import JournalError

LOCK_SUFFIX = ".lock"
ELSEWHERE = "or use another --journal"
#: The journal's files: read and written by their user only.
PRIVATE_MODE = 0o600
#: A journal's folder made by a start: its user's only.
FOLDER_MODE = 0o700
#: Another user who can write the folder can replace the journal's files in it.
_OTHERS_WRITE = stat.S_IWGRP | stat.S_IWOTH
_SIDE_FILES = ("-wal", "-shm")

log = logging.getLogger(__name__)


class JournalPathError(JournalError):
    """The journal's path cannot hold a journal: a folder, a folder that cannot be made, a
    folder that cannot be written."""


class JournalLocked(JournalError):
    """Another runtime (or another journal object in this one) has the journal open."""

    def __init__(self, path: Path, holder: Holder | None) -> None:
        self.path = path
        self.holder = holder
        if holder is not None and holder.is_this_process():
            message = (f"journal {path} is already open in this process (pid {holder.pid}) "
                       "by another journal object; share that one (AgentRuntime gives the "
                       "processes on one file one journal) or close it first")
        else:
            who = holder.describe() if holder is not None else "another process"
            message = f"journal {path} is held by {who}; stop that runtime first, {ELSEWHERE}"
        super().__init__(message)


@dataclass(frozen=True, slots=True)
class Holder:
    pid: int
    host: str
    since: float  # epoch seconds

    def describe(self) -> str:
        when = time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime(self.since))
        return f"pid {self.pid} on host {self.host} since {when}"

    def is_this_process(self) -> bool:
        return self.pid == os.getpid() and self.host == socket.gethostname()

    def to_json(self) -> str:
        return json.dumps({"pid": self.pid, "host": self.host, "since": self.since})

    @classmethod
    def from_json(cls, text: str) -> Holder | None:
        try:
            data = json.loads(text)
            return cls(int(data["pid"]), str(data["host"]), float(data["since"]))
        except (ValueError, TypeError, KeyError):
            return None  # empty (a holder that has not written yet) or not ours


def lock_path(path: Path) -> Path:
    return path.with_name(path.name + LOCK_SUFFIX)


def read_holder(path: Path) -> Holder | None:
    """Who holds the journal at ``path`` by its lock file (None: unknown, or nobody)."""
    try:
        return Holder.from_json(lock_path(path).read_text(encoding="utf-8"))
    except OSError:
        return None


def check_path(path: Path) -> None:
    """Make sure ``path`` can be a journal file and its folder exists (made if missing, as a
    first start expects); JournalPathError names the path and what to do."""
    if path.is_dir():
        raise JournalPathError(f"journal path {path} is a folder, not a file; give a file "
                               f"such as {path / 'journal.db'}, {ELSEWHERE}")
    if path.exists() and not path.is_file():
        raise JournalPathError(f"journal path {path} is not a regular file; give a file "
                               f"path, {ELSEWHERE}")
    folder = path.parent
    try:
        folder.mkdir(mode=FOLDER_MODE, parents=True, exist_ok=True)
    except (FileExistsError, NotADirectoryError):
        blocker = next((p for p in (folder, *folder.parents) if p.exists() and not p.is_dir()),
                       folder)
        raise JournalPathError(f"cannot make the folder {folder} for journal {path}: "
                               f"{blocker} is a file, not a folder; move that file, "
                               f"{ELSEWHERE}") from None
    except OSError as exc:
        raise JournalPathError(f"cannot make the folder {folder} for journal {path}: "
                               f"{exc.strerror}; create it (writable by this user), "
                               f"{ELSEWHERE}") from None
    check_folder(folder, path)


def check_folder(folder: Path, path: Path) -> None:
    """JournalPathError unless only its owner can write ``folder`` (or it is sticky, as /tmp:
    there nobody can remove or rename another user's files)."""
    try:
        mode = os.stat(folder).st_mode
    except OSError as exc:
        raise JournalPathError(f"cannot read the folder {folder} of journal {path}: "
                               f"{exc.strerror}; {ELSEWHERE}") from None
    if mode & _OTHERS_WRITE and not mode & stat.S_ISVTX:
        who = "every user" if mode & stat.S_IWOTH else "its group"
        raise JournalPathError(
            f"the folder {folder} of journal {path} is writable by {who} (mode "
            f"{stat.S_IMODE(mode):04o}): another user could replace the journal's files; "
            f"run 'chmod go-w {folder}', {ELSEWHERE}")


def make_private(path: Path, what: str = "journal") -> None:
    """Create the SQLite file at ``path`` 0600 before SQLite opens it (SQLite gives its -wal and
    -shm the same mode), or tighten an existing one (and those) that this user owns and others
    can read, saying so in the log. Raises the OSError of a file that cannot be created."""
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, PRIVATE_MODE)
    except FileExistsError:
        _tighten(path, what)
        return
    os.close(fd)


def _tighten(path: Path, what: str) -> None:
    """Made private: an existing file of ours (from a promptui before 0600) that others read."""
    loose: list[str] = []
    for file in (path, *(path.with_name(path.name + side) for side in _SIDE_FILES)):
        try:
            info = os.stat(file)
            if info.st_uid != os.geteuid() or not stat.S_IMODE(info.st_mode) & 0o077:
                continue
            os.chmod(file, stat.S_IMODE(info.st_mode) & 0o700)
        except OSError:
            continue  # missing (no -wal yet) or not ours to change: nothing to tighten
        loose.append(f"{file.name} (was {stat.S_IMODE(info.st_mode):04o})")
    if loose:
        log.warning("%s %s was readable by other users: made private (mode 0600): %s", what,
                    path, ", ".join(loose))


class JournalLock:
    """The writer's lock on one journal file; ``acquire`` and ``release`` run on any thread."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.file = lock_path(path)
        self._fd: int | None = None

    @property
    def held(self) -> bool:
        return self._fd is not None

    def acquire(self) -> None:
        """Hold the lock, or raise JournalLocked naming the holder (JournalPathError when the
        lock file cannot be made: the folder is read-only or not ours)."""
        while self._fd is None:
            fd = self._open()
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                os.close(fd)
                raise JournalLocked(self.path, read_holder(self.path)) from None
            except OSError as exc:  # a file system without locks (some network mounts)
                os.close(fd)
                raise JournalPathError(f"cannot lock journal {self.path} ({self.file}): "
                                       f"{exc.strerror}; keep journals on a local disk, "
                                       f"{ELSEWHERE}") from None
            if not self._still_there(fd):  # its holder removed it as we opened it: again
                os.close(fd)
                continue
            me = Holder(os.getpid(), socket.gethostname(), time.time())
            with contextlib.suppress(OSError):  # the lock holds without the note; only the
                os.ftruncate(fd, 0)             # next one's message would be vaguer
                os.pwrite(fd, me.to_json().encode() + b"\n", 0)
            self._fd = fd

    def release(self) -> None:
        fd, self._fd = self._fd, None
        if fd is None:
            return
        try:  # removed while still held, so nobody can lock a file that is no longer there
            with contextlib.suppress(OSError):
                self.file.unlink()
        finally:
            os.close(fd)  # closing the file drops the flock

    def _open(self) -> int:
        # O_NOFOLLOW: a link planted at the lock path would have its target overwritten with
        # our pid. O_NONBLOCK: a FIFO planted there must not hang the start (refused below).
        flags = os.O_RDWR | os.O_CREAT | os.O_CLOEXEC | os.O_NOFOLLOW | os.O_NONBLOCK
        try:
            fd = os.open(self.file, flags, PRIVATE_MODE)
        except OSError as exc:
            if exc.errno == errno.ELOOP:
                raise JournalPathError(
                    f"the lock file {self.file} of journal {self.path} is a symbolic link "
                    f"(to {_link_target(self.file)}); it was not followed: remove the link "
                    f"('rm {self.file}') and check who made it, {ELSEWHERE}") from None
            raise JournalPathError(
                f"cannot write in the folder {self.file.parent} of journal {self.path}: "
                f"{exc.strerror}; make it writable by this user, {ELSEWHERE}") from None
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            os.close(fd)
            raise JournalPathError(f"the lock file {self.file} of journal {self.path} is not "
                                   f"a regular file; remove it, {ELSEWHERE}")
        if stat.S_IMODE(info.st_mode) & 0o077:  # left by a holder before 0600
            with contextlib.suppress(OSError):
                os.fchmod(fd, PRIVATE_MODE)
        return fd

    def _still_there(self, fd: int) -> bool:
        """Whether the locked file is still the one at the lock path: a holder removes the
        file when it lets go (a dead one leaves it, to be taken over)."""
        try:
            here = os.stat(self.file)
        except FileNotFoundError:
            return False
        mine = os.fstat(fd)
        return (here.st_dev, here.st_ino) == (mine.st_dev, mine.st_ino)


def _link_target(link: Path) -> str:
    try:
        return os.readlink(link)
    except OSError:  # removed meanwhile
        return "?"
