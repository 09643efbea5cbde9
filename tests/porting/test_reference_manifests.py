"""Manifests written for the reference runtime (tests/porting/manifests: its field spellings, a
custom trigger type from a plugin, its filter dialect, ``journal: {backend: file, path:
.promptise/journal}``) are accepted by ``promptui validate`` and started by ``promptui run``,
each in a subprocess as a user runs them: events of every kind go through, filtered as the
reference filters them, and Ctrl+C stops everything cleanly (exit 0)."""

from __future__ import annotations

import hashlib
import hmac
import json
import os
import shutil
import signal
import sqlite3
import subprocess
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.helpers.cli import promptui_command
from tests.helpers.polling import poll
from tests.helpers.ports import free_port

pytestmark = pytest.mark.slow

MANIFESTS = Path(__file__).parent / "manifests"
NAMES = {"deploy-events", "github-prs", "inbox-files", "job-queue", "pipeline-watcher"}
SECRET = "porting-github-secret"
START = 30.0  # seconds for the served processes to start and take their first events


@pytest.fixture
def agents(tmp_path: Path) -> tuple[Path, dict[str, str]]:
    folder = tmp_path / "agents"
    shutil.copytree(MANIFESTS, folder, ignore=shutil.ignore_patterns("__pycache__"))
    env = {**os.environ, "GITHUB_WEBHOOK_SECRET": SECRET,
           "PORTING_WEBHOOK_PORT": str(free_port()),
           "PORTING_INBOX": str(tmp_path / "inbox"), "PORTING_SPOOL": str(tmp_path / "spool")}
    env.pop("OPENAI_API_KEY", None)  # nothing here calls a model service
    return folder, env


def test_validate_accepts_them_with_notes_on_the_reference_spellings(
    agents: tuple[Path, dict[str, str]], tmp_path: Path
) -> None:
    folder, env = agents
    done = subprocess.run([*promptui_command(), "validate", str(folder)], cwd=tmp_path,
                          env=env, capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stdout + done.stderr
    out = " ".join(done.stdout.split())  # the console wraps long lines
    for name in NAMES:
        assert f"ok {name}" in out, out
    for expected in ("'cron_timezone' is the reference runtime's spelling of 'timezone'",
                     "'watch_patterns' is the reference runtime's spelling of 'patterns'",
                     "watch_events 'created' is the reference runtime's name",
                     "backend 'file' is the reference runtime's journal folder",
                     "journal/journal.db",
                     "reads 'action' and 'pull_request' from the payload",
                     "'max' is the reference runtime's spelling of 'inject_limit'"):
        assert expected in out, expected
    assert "error" not in out


def _journal(tmp_path: Path) -> Path:
    return tmp_path / ".promptise" / "journal" / "journal.db"


def _rows(db: Path, sql: str) -> list[tuple[Any, ...]]:
    if not db.exists():
        return []
    try:
        with sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=5) as conn:
            return list(conn.execute(sql).fetchall())
    except sqlite3.OperationalError:  # not created yet
        return []


def _running(db: Path) -> set[str]:
    rows = _rows(db, "SELECT process, data FROM entries WHERE entry_type = 'state_transition'")
    return {process for process, data in rows if json.loads(data).get("to_state") == "running"}


def _accepted(db: Path) -> dict[str, int]:
    rows = _rows(db, "SELECT process, count(*) FROM entries WHERE entry_type = "
                     "'event_accepted' GROUP BY process")
    return {str(process): int(count) for process, count in rows}


def _github(body: dict[str, Any], port: int) -> httpx.Response:
    raw = json.dumps(body).encode()
    signature = "sha256=" + hmac.new(SECRET.encode(), raw, hashlib.sha256).hexdigest()
    return httpx.post(f"http://127.0.0.1:{port}/github", content=raw, timeout=10, headers={
        "X-Hub-Signature-256": signature, "X-GitHub-Event": "pull_request",
        "X-GitHub-Delivery": hashlib.sha1(raw).hexdigest(), "Content-Type": "application/json"})


def test_run_starts_them_events_flow_and_ctrl_c_exits_0(
    agents: tuple[Path, dict[str, str]], tmp_path: Path
) -> None:
    folder, env = agents
    port = int(env["PORTING_WEBHOOK_PORT"])
    db = _journal(tmp_path)
    proc = subprocess.Popen([*promptui_command(), "run", str(folder), "--json"], cwd=tmp_path,
                            env=env, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    try:
        poll(lambda: _running(db) >= NAMES or proc.poll() is not None, START,
             what="all five running")
        assert proc.poll() is None, proc.communicate()[1]
        # the webhook: a pull request the filter wants, and one it skips (a draft)
        pr = {"title": "Fix: crash on start", "draft": False, "labels": [{"name": "bug"}]}
        assert _github({"action": "opened", "pull_request": pr}, port).status_code == 202
        skipped = _github({"action": "opened", "pull_request": {**pr, "draft": True}}, port)
        assert (skipped.status_code, skipped.json()["status"]) == (200, "ignored")
        # the custom trigger: a job the filter wants, and one it skips (priority 1)
        spool = Path(env["PORTING_SPOOL"])
        poll(spool.is_dir, START, what="the spool folder")
        (spool / "1.json").write_text('{"kind": " build ", "priority": "3", "attempt": 1}')
        (spool / "2.json").write_text('{"kind": "build", "priority": "1", "attempt": 1}')
        # the file watch: a new .csv runs, a .json is filtered
        inbox = Path(env["PORTING_INBOX"])
        poll(inbox.is_dir, START, what="the inbox folder")
        (inbox / "report.csv").write_text("a,b\n1,2\n")
        (inbox / "notes.json").write_text("{}")
        poll(lambda: _accepted(db) == {"github-prs": 1, "job-queue": 1, "inbox-files": 1}, START,
             what=f"three accepted events (now {_accepted(db)})")
        proc.send_signal(signal.SIGINT)
        out, errors = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    assert proc.returncode == 0, errors
    final = json.loads(out)["processes"]
    assert set(final) == NAMES
    assert {name: p["state"] for name, p in final.items()} == dict.fromkeys(NAMES, "stopped")
    for name in ("github-prs", "job-queue", "inbox-files"):
        assert final[name]["invocation_count"] == 1, (name, final[name])
    assert final["job-queue"]["filtered_count"] == 1
    assert final["inbox-files"]["filtered_count"] == 1
    assert all(p["dead_letter_count"] == 0 for p in final.values())
