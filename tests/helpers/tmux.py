"""A real terminal for the real ``promptui`` command: one detached session on a private tmux
server (its own socket, no config file), so the operator's tmux is never touched and killing
the server ends everything a test started."""

from __future__ import annotations

import shutil
import subprocess
import tempfile
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest


def tmux_missing() -> bool:
    """True when tmux is not installed (a test then skips: it needs a real terminal)."""
    return shutil.which("tmux") is None


class Tmux:
    """One session of ``width`` x ``height``; every wait ends by ``deadline`` seconds after the
    session object was made, whatever its own cap."""

    def __init__(self, socket_path: Path, session: str, *, width: int = 80, height: int = 24,
                 deadline: float = 60.0) -> None:
        self.base = ["tmux", "-S", str(socket_path), "-f", "/dev/null"]
        self.session = session
        self.width, self.height = width, height
        self.started = time.monotonic()
        self.deadline = deadline

    def run(self, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
        """One tmux command against the private server."""
        return subprocess.run([*self.base, *args], capture_output=True, text=True, timeout=10,
                              check=check)

    def start(self, cwd: Path, command: str) -> None:
        """Run the shell ``command`` in a new session in ``cwd`` (the session has the test's
        environment: set or unset variables in ``command`` itself, e.g. with ``env``)."""
        self.run("new-session", "-d", "-s", self.session, "-x", str(self.width),
                 "-y", str(self.height), "-c", str(cwd), command)

    def keys(self, *keys: str, literal: bool = False) -> None:
        """Type ``keys`` (tmux key names, or text when ``literal``)."""
        self.run("send-keys", "-t", self.session, *(["-l"] if literal else []), *keys)

    def screen(self, *, joined: bool = False) -> str:
        """The pane's text; ``joined``: lines the terminal wrapped are joined back."""
        result = self.run("capture-pane", "-p", *(["-J"] if joined else []), "-t",
                          self.session, check=False)
        return result.stdout if result.returncode == 0 else ""

    def alive(self) -> bool:
        """Whether the session (so the command in it) is still there."""
        return self.run("has-session", "-t", self.session, check=False).returncode == 0

    def expect(self, what: str, condition: Callable[[str], bool], cap: float = 20.0) -> str:
        """Poll the pane until ``condition(screen)`` holds; fail with the last screen."""
        until = min(time.monotonic() + cap, self.started + self.deadline)
        screen = ""
        while time.monotonic() < until:
            screen = self.screen()
            if condition(screen):
                return screen
            time.sleep(0.2)
        pytest.fail(f"timed out waiting for {what}; the screen was:\n{screen}")

    def kill(self) -> None:
        """End the private server and everything running in it."""
        subprocess.run([*self.base, "kill-server"], capture_output=True, timeout=10)


@contextmanager
def private_tmux(*, width: int = 80, height: int = 24, deadline: float = 60.0
                 ) -> Iterator[Tmux]:
    """A ``Tmux`` session on its own server, killed (with what runs in it) on the way out."""
    # A short private directory: a unix socket path must stay under ~100 bytes.
    home = Path(tempfile.mkdtemp(prefix="pui-tmux-"))
    session = Tmux(home / "sock", f"promptui-e2e-{uuid.uuid4().hex[:12]}", width=width,
                   height=height, deadline=deadline)
    try:
        yield session
    finally:
        session.kill()
        shutil.rmtree(home, ignore_errors=True)
