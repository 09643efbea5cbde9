"""``promptui serve --cluster``'s command line: what goes with it, a database that cannot be
reached (one line, exit 2), and a DSN's password never shown (log, discovery file, API)."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

from tests.helpers.cli import promptui_command
from tests.helpers.cluster import Cluster, write_agents
from tests.helpers.polling import poll

pytestmark = pytest.mark.slow

SECRET = "S3cret-pw-4711"


def serve(folder: Path, *args: str, env: dict[str, str] | None = None
          ) -> subprocess.CompletedProcess[str]:
    agents = write_agents(folder, ["p0"])
    return subprocess.run([*promptui_command(), "serve", str(agents), "--port", "0", *args],
                          cwd=folder, env={**os.environ, **(env or {})}, capture_output=True,
                          text=True, timeout=60, stdin=subprocess.DEVNULL)


def test_options_that_need_a_cluster_and_a_dsn_from_the_environment(tmp_path: Path) -> None:
    alone = serve(tmp_path, "--node-id", "n1")
    assert alone.returncode == 2 and "go with --cluster" in alone.stderr
    env = {k: v for k, v in os.environ.items() if k != "PROMPTUI_DSN"}
    unset = subprocess.run([*promptui_command(), "serve", "--port", "0", "--cluster", "env"],
                           cwd=tmp_path, env=env, capture_output=True, text=True, timeout=60)
    assert unset.returncode == 2 and "PROMPTUI_DSN is not set" in unset.stderr


def test_a_database_that_cannot_be_reached_is_one_line_without_the_password(
        tmp_path: Path) -> None:
    done = serve(tmp_path, "--cluster", f"postgresql://me:{SECRET}@127.0.0.1:1/db",
                 "--node-id", "n1")
    assert done.returncode == 2, done.stderr
    assert "node 'n1' cannot join the cluster at postgresql://me:***@127.0.0.1:1/db" in \
        done.stderr
    assert SECRET not in done.stderr + done.stdout
    assert "Traceback" not in done.stderr


def test_the_password_is_never_shown(tmp_path: Path, pg_dsn: str) -> None:
    dsn = f"{pg_dsn}&password={SECRET}"  # trust auth: accepted, and must stay hidden
    cluster = Cluster(tmp_path, dsn, write_agents(tmp_path, ["p0"]), tmp_path / "ledger.txt")
    try:
        node = cluster.start("n1")
        poll(lambda: cluster.running(["p0"]), 20, "p0 running")
        with node.client() as client:
            shown = [client.get(path).text for path in
                     ("/runtime", "/cluster/nodes", "/processes", "/processes/p0")]
        discovery = json.loads((node.folder / ".promptui" / "serve.json").read_text())
        assert discovery["node_id"] == "n1" and "password=***" in discovery["cluster"]
        assert node.stop() == 0
        for text in [*shown, node.text(), json.dumps(discovery)]:
            assert SECRET not in text
    finally:
        cluster.close()
