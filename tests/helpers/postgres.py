"""A throwaway PostgreSQL 15 for tests and benchmarks, from the installed binaries.

    server = PgServer()            # initdb into a fresh temp folder, then start it
    dsn = server.create_database() # postgresql:///t1?host=<socket folder>&user=postgres
    dsn = server.create_schema()   # ...:///tests?host=...&user=postgres&options=-csearch_path%3Ds2
    server.stop("immediate")       # a crash: no shutdown checkpoint, recovery on the next start
    server.start()                 # the same data folder again
    server.cleanup()               # stop (fast) and remove the folder; atexit does it too

Unix socket only (``listen_addresses=''``), in the server's own folder, with trust auth for the
``postgres`` superuser. fsync stays on: the journal's tests are about durability. When this
process is root, PostgreSQL refuses to run as root, so initdb and pg_ctl run as the
``postgres`` OS user (``runuser``) on a folder chowned to it.
"""

from __future__ import annotations

import atexit
import contextlib
import itertools
import os
import pwd
import shutil
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Literal

import psycopg

PG_VERSION = 15
SEARCHED = [Path(f"/usr/lib/postgresql/{PG_VERSION}/bin"),
            Path(f"/usr/pgsql-{PG_VERSION}/bin"),
            Path("/usr/local/pgsql/bin")]
START_TIMEOUT = 60.0  # seconds: a loaded 2-core CI box can take a while to replay WAL
StopMode = Literal["smart", "fast", "immediate"]


def find_bin_dir() -> Path | None:
    """The folder holding initdb and pg_ctl: $PG_BIN_DIR, a known install, or $PATH."""
    candidates = [Path(os.environ["PG_BIN_DIR"])] if os.environ.get("PG_BIN_DIR") else []
    candidates += SEARCHED
    on_path = shutil.which("pg_ctl")
    if on_path:
        candidates.append(Path(on_path).parent)
    for folder in candidates:
        if (folder / "initdb").is_file() and (folder / "pg_ctl").is_file():
            return folder
    return None


def unavailable_reason() -> str | None:
    """Why no throwaway PostgreSQL can run here (for pytest.skip), or None."""
    if find_bin_dir() is None:
        return (f"PostgreSQL {PG_VERSION} binaries (initdb, pg_ctl) not found in "
                f"{', '.join(map(str, SEARCHED))}, $PG_BIN_DIR or $PATH")
    if os.geteuid() == 0:
        try:
            pwd.getpwnam("postgres")
        except KeyError:
            return "running as root and there is no 'postgres' OS user to run PostgreSQL as"
        if shutil.which("runuser") is None:
            return "running as root and runuser is missing (needed to run PostgreSQL as postgres)"
    return None


class PgServer:
    """One PostgreSQL cluster in its own temp folder; started by the constructor."""

    def __init__(self, *, bin_dir: Path | None = None, start: bool = True,
                 prefix: str = "promptui-pg-") -> None:
        found = bin_dir or find_bin_dir()
        if found is None:
            raise RuntimeError(unavailable_reason() or "PostgreSQL binaries not found")
        self.bin_dir = found
        self.root = Path(tempfile.mkdtemp(prefix=prefix))  # short: a socket path has a limit
        self.data_dir = self.root / "data"
        self.socket_dir = self.root
        self.log_file = self.root / "server.log"
        self._as_postgres = os.geteuid() == 0
        self._names = itertools.count(1)
        self._removed = False
        atexit.register(self.cleanup)  # a script that forgets, or a session that dies in setup
        try:
            if self._as_postgres:
                entry = pwd.getpwnam("postgres")
                os.chown(self.root, entry.pw_uid, entry.pw_gid)
            self._run("initdb", "-D", str(self.data_dir), "-U", "postgres", "-A", "trust",
                      "-E", "UTF8", "--locale=C", "--no-instructions")
            if start:
                self.start()
        except BaseException:
            self.cleanup()
            raise

    # -- commands ---------------------------------------------------------------------------------
    def _command(self, tool: str, *args: str) -> list[str]:
        command = [str(self.bin_dir / tool), *args]
        return ["runuser", "-u", "postgres", "--", *command] if self._as_postgres else command

    def _run(self, tool: str, *args: str, timeout: float = 120.0) -> None:
        done = subprocess.run(self._command(tool, *args), capture_output=True, text=True,
                              timeout=timeout, check=False, stdin=subprocess.DEVNULL)
        if done.returncode != 0:
            raise RuntimeError(f"{tool} {' '.join(args)} failed ({done.returncode}):\n"
                               f"{done.stdout}\n{done.stderr}\n{self.log_tail()}")

    def log_tail(self, lines: int = 30) -> str:
        try:
            return "\n".join(self.log_file.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return ""

    # -- the server -------------------------------------------------------------------------------
    def start(self, timeout: float = START_TIMEOUT) -> None:
        """Start on the existing data folder and return once it accepts connections."""
        options = " ".join([
            "-c listen_addresses=''",  # no TCP at all
            f"-c unix_socket_directories='{self.socket_dir}'",
            "-c fsync=on", "-c synchronous_commit=on",  # durability is what is tested
            "-c shared_buffers=16MB", "-c max_connections=60",
            "-c max_wal_size=256MB", "-c log_min_messages=warning",
        ])
        # -w: pg_ctl itself polls until the server is ready (or the timeout); then we check.
        self._run("pg_ctl", "-D", str(self.data_dir), "-l", str(self.log_file), "-o", options,
                  "-w", "-t", str(int(timeout)), "start", timeout=timeout + 10)
        self.wait_ready(timeout)

    def wait_ready(self, timeout: float = START_TIMEOUT) -> None:
        """Poll until a connection succeeds (a bounded wait, never a fixed sleep)."""
        deadline = time.monotonic() + timeout
        while True:
            try:
                with psycopg.connect(self.dsn("postgres"), connect_timeout=2):
                    return
            except psycopg.OperationalError as exc:
                if time.monotonic() > deadline:
                    raise RuntimeError(f"PostgreSQL in {self.root} did not accept connections "
                                       f"within {timeout} s: {exc}\n{self.log_tail()}") from exc
                time.sleep(0.02)  # between polls only

    def stop(self, mode: StopMode = "fast") -> None:
        """Stop it: ``fast`` (clean), ``immediate`` (a crash: the next start recovers)."""
        if not self.running:
            return
        self._run("pg_ctl", "-D", str(self.data_dir), "-m", mode, "-w", "-t", "60", "stop")

    @property
    def running(self) -> bool:
        """A postmaster.pid whose process is alive."""
        pid_file = self.data_dir / "postmaster.pid"
        try:
            pid = int(pid_file.read_text().split("\n", 1)[0])
        except (OSError, ValueError):
            return False
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return False
        except PermissionError:  # alive, owned by another user
            return True
        return True

    def cleanup(self) -> None:
        """Stop (fast, then immediate if that fails) and remove the folder; safe to repeat."""
        if self._removed:
            return
        self._removed = True
        with contextlib.suppress(Exception):
            atexit.unregister(self.cleanup)
        try:
            self.stop("fast")
        except Exception:
            with contextlib.suppress(Exception):
                self.stop("immediate")
        shutil.rmtree(self.root, ignore_errors=True)

    def __enter__(self) -> PgServer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.cleanup()

    # -- databases --------------------------------------------------------------------------------
    def dsn(self, dbname: str) -> str:
        return f"postgresql:///{dbname}?host={self.socket_dir}&user=postgres"

    def create_database(self, name: str | None = None) -> str:
        """A new empty database; returns its DSN."""
        name = name or f"t{next(self._names)}"
        with psycopg.connect(self.dsn("postgres"), autocommit=True) as conn:
            conn.execute(f'CREATE DATABASE "{name}"')
        return self.dsn(name)

    def create_schema(self, dbname: str = "tests", name: str | None = None) -> str:
        """A new empty schema in ``dbname`` (made on first use); returns a DSN whose
        search_path is that schema. Much cheaper than a database (CREATE DATABASE copies a
        template, DROP DATABASE waits for a checkpoint), so a test can have its own."""
        name = name or f"s{next(self._names)}"
        with psycopg.connect(self.dsn("postgres"), autocommit=True) as conn:
            if conn.execute("SELECT 1 FROM pg_database WHERE datname = %s",
                            (dbname,)).fetchone() is None:
                conn.execute(f'CREATE DATABASE "{dbname}"')
        with psycopg.connect(self.dsn(dbname), autocommit=True) as conn:
            conn.execute(f'CREATE SCHEMA "{name}"')
        return f"{self.dsn(dbname)}&options=-csearch_path%3D{name}"

    def drop_schema(self, dsn: str) -> None:
        """Drop the schema a DSN from create_schema names, with everything in it."""
        name = dsn.rsplit("%3D", 1)[1]
        with psycopg.connect(self.dsn(database_name(dsn)), autocommit=True) as conn:
            conn.execute("SET lock_timeout = '10s'")  # a leaked transaction: fail, not hang
            conn.execute(f'DROP SCHEMA IF EXISTS "{name}" CASCADE')

    def drop_database(self, name: str) -> None:
        """Drop it, closing whatever is still connected to it (a test that failed mid-way)."""
        with psycopg.connect(self.dsn("postgres"), autocommit=True) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def database_name(dsn: str) -> str:
    """The database a DSN made here names."""
    return dsn.split("///", 1)[1].split("?", 1)[0]
