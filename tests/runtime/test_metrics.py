"""``GET /metrics`` (issue 34): the API's app built in the test's loop and called over ASGI,
two processes run (one run succeeds, one fails to a dead letter), the scrape parsed with the
Prometheus client's own parser; 401 without the token. Also the Grafana dashboard kept in the
docs queries only metrics that exist."""

from __future__ import annotations

import json
import re
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import httpx
from prometheus_client.parser import text_string_to_metric_families

from runtime_core import AgentRuntime, ProcessConfig
from runtime_core.agent.model import ModelRequest, ModelTurn, Usage
from runtime_core.api.server import create_app
from runtime_core.control import LocalControl
from tests.helpers.polling import wait_for
from tests.helpers.serving import TOKEN

DASHBOARD = Path(__file__).parents[2] / "docs" / "operations" / "grafana-promptui.json"
PAGE = DASHBOARD.with_name("metrics.md")


class Replies:
    name = "replies-v1"

    async def complete(self, request: ModelRequest) -> ModelTurn:
        return ModelTurn(reply="done", usage=Usage(input_tokens=40, output_tokens=7))


class Refuses:
    name = "refuses-v1"

    async def complete(self, request: ModelRequest) -> ModelTurn:
        raise ConnectionError("the target refused the connection")


def make_runtime(journal: Path) -> AgentRuntime:
    runtime = AgentRuntime()
    stored = {"level": "checkpoint", "backend": "sqlite", "path": str(journal)}
    runtime.add_process("worker", ProcessConfig(journal=stored), model=Replies())
    runtime.add_process("broken", ProcessConfig(
        journal=stored, trigger_delivery={"max_retries": 0}, max_consecutive_failures=1000),
        model=Refuses())
    return runtime


@asynccontextmanager
async def client_of(runtime: AgentRuntime, token: str | None = TOKEN
                    ) -> AsyncIterator[httpx.AsyncClient]:
    app = create_app(LocalControl(runtime), token=TOKEN, start_processes=False)
    headers = {} if token is None else {"Authorization": f"Bearer {token}"}
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app),
                                 base_url="http://127.0.0.1", headers=headers) as client:
        yield client


def samples(text: str) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    """Every sample of a scrape: (name, sorted labels) -> value."""
    return {(s.name, tuple(sorted(s.labels.items()))): s.value
            for family in text_string_to_metric_families(text) for s in family.samples}


def value(found: dict[tuple[str, tuple[tuple[str, str], ...]], float], name: str,
          **labels: str) -> float | None:
    return found.get((name, tuple(sorted(labels.items()))))


async def test_a_scrape_counts_runs_events_tokens_and_journal_commits(tmp_path: Path) -> None:
    runtime = make_runtime(tmp_path / "journal.db")
    await runtime.start_all()
    try:
        async with client_of(runtime) as client:
            control = LocalControl(runtime)
            await control.inject("worker", {"task": "one"})
            await control.inject("worker", {"task": "two"})
            await control.inject("broken", {"task": "three"})

            async def scraped() -> dict[tuple[str, tuple[tuple[str, str], ...]], float] | None:
                answer = await client.get("/metrics")
                assert answer.status_code == 200, answer.text
                assert answer.headers["content-type"].startswith("text/plain")
                found = samples(answer.text)
                done = (value(found, "promptui_runs_total", process="worker",
                              outcome="succeeded") == 2
                        and value(found, "promptui_dead_letters", process="broken") == 1
                        and value(found, "promptui_runs_total", process="broken",
                                  outcome="failed") == 1)
                return found if done else None

            found = await wait_for(scraped, what="two runs done and one dead letter")
    finally:
        await runtime.close()
    assert value(found, "promptui_runs_total", process="worker", outcome="succeeded") == 2
    assert value(found, "promptui_runs_total", process="broken", outcome="failed") == 1
    assert value(found, "promptui_run_duration_seconds_count", process="worker") == 2
    assert value(found, "promptui_dead_letters", process="broken") == 1
    assert value(found, "promptui_dead_letters", process="worker") == 0
    assert value(found, "promptui_queue_depth", process="worker") == 0
    assert value(found, "promptui_runs_waiting", process="worker") == 0
    assert value(found, "promptui_process_state", process="worker", state="running") == 1
    assert value(found, "promptui_process_state", process="worker", state="stopped") == 0
    assert value(found, "promptui_events_total", process="worker", trigger_type="manual",
                 result="accepted") == 2
    assert value(found, "promptui_events_total", process="broken", trigger_type="manual",
                 result="dead_lettered") == 1
    assert value(found, "promptui_model_tokens_total", process="worker", model="replies-v1",
                 kind="input") == 80
    assert value(found, "promptui_model_tokens_total", process="worker", model="replies-v1",
                 kind="output") == 14
    commits = value(found, "promptui_journal_commit_seconds_count")
    assert commits is not None and commits > 0
    assert value(found, "promptui_journal_commit_seconds_bucket", le="+Inf") == commits
    assert value(found, "promptui_journal_state", state="ok") == 1
    assert value(found, "promptui_journal_state", state="degraded") == 0


async def test_metrics_need_the_token(tmp_path: Path) -> None:
    runtime = make_runtime(tmp_path / "journal.db")
    async with client_of(runtime, token=None) as client:
        missing = await client.get("/metrics")
    async with client_of(runtime, token="not-the-token") as client:
        wrong = await client.get("/metrics")
    assert missing.status_code == wrong.status_code == 401
    assert "promptui_" not in missing.text + wrong.text


async def test_each_server_has_its_own_registry(tmp_path: Path) -> None:
    """Two runtimes in one interpreter (as in the tests): one's runs never show in the other's
    scrape, and building a second app does not fail on a duplicate metric."""
    busy, idle = make_runtime(tmp_path / "a.db"), make_runtime(tmp_path / "b.db")
    await busy.start_all()
    try:
        async with client_of(busy) as busy_client, client_of(idle) as idle_client:
            await LocalControl(busy).inject("worker", {"task": "one"})
            worker = busy.get_process("worker")

            async def one_run() -> dict[tuple[str, tuple[tuple[str, str], ...]], float] | None:
                found = samples((await busy_client.get("/metrics")).text)
                return found if value(found, "promptui_runs_total", process="worker",
                                      outcome="succeeded") == 1 else None

            busy_found = await wait_for(one_run, what="one run counted")
            assert worker.invocation_count == 1
            idle_found = samples((await idle_client.get("/metrics")).text)
    finally:
        await busy.close()
    assert value(busy_found, "promptui_runs_total", process="worker", outcome="succeeded") == 1
    assert value(idle_found, "promptui_runs_total", process="worker", outcome="succeeded") is None
    assert value(idle_found, "promptui_process_state", process="worker", state="created") == 1


def test_the_dashboard_queries_only_metrics_that_exist() -> None:
    """Every metric the Grafana dashboard queries is one the metrics page lists."""
    listed = set(re.findall(r"^\| `(promptui_[a-z_]+)`", PAGE.read_text(), re.MULTILINE))
    assert "promptui_runs_total" in listed
    dashboard = json.loads(DASHBOARD.read_text())
    queried = {re.sub(r"_(bucket|count|sum)$", "", name)
               for panel in dashboard["panels"] for target in panel.get("targets", ())
               for name in re.findall(r"promptui_[a-z_]+", target["expr"])}
    assert queried, "the dashboard queries nothing"
    assert queried <= listed, f"queried but not listed: {sorted(queried - listed)}"
