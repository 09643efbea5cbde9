"""``GET /metrics`` of a real ``promptui serve`` (issue 34): events injected over the API, the
scrape taken over HTTP with the bearer token and parsed with the Prometheus client's parser,
its counts checked against what the API and the journal say."""

from __future__ import annotations

from pathlib import Path

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families

from tests.helpers.polling import poll
from tests.helpers.serving import start_serve, write_agents

pytestmark = pytest.mark.slow

Samples = dict[tuple[str, tuple[tuple[str, str], ...]], float]


def scrape(url: str, token: str | None) -> httpx.Response:
    headers = {} if token is None else {"Authorization": f"Bearer {token}"}
    return httpx.get(f"{url}/metrics", headers=headers, timeout=15.0)


def samples(text: str) -> Samples:
    return {(s.name, tuple(sorted(s.labels.items()))): s.value
            for family in text_string_to_metric_families(text) for s in family.samples}


def value(found: Samples, name: str, **labels: str) -> float | None:
    return found.get((name, tuple(sorted(labels.items()))))


def test_a_scrape_of_promptui_serve_matches_its_journal_and_status(tmp_path: Path) -> None:
    agents = write_agents(tmp_path, judge=False)
    server = start_serve(tmp_path, str(agents), "--journal", str(tmp_path / "journal.db"))
    try:
        api = server.client()
        for n in range(3):
            assert api.post("/processes/worker/inject",
                            json={"payload": {"summary": f"task {n}"}}).status_code == 202
        for n in range(2):
            assert api.post("/processes/broken/inject",
                            json={"payload": {"n": n}}).status_code == 202

        def settled() -> Samples | None:
            answer = scrape(server.url, server.token)
            assert answer.status_code == 200, answer.text
            found = samples(answer.text)
            done = (value(found, "promptui_runs_total", process="worker",
                          outcome="succeeded") == 3
                    and value(found, "promptui_dead_letters", process="broken") == 2)
            return found if done else None

        found = poll(settled, 30, "three runs and two dead letters in the scrape")
        assert scrape(server.url, None).status_code == 401
        assert scrape(server.url, "wrong-token").status_code == 401

        status = api.get("/processes/broken").json()
        runs = api.get("/processes/worker/runs").json()
    finally:
        code = server.stop()
    assert code == 0, server.stderr()
    assert value(found, "promptui_runs_total", process="broken", outcome="failed") == 2
    assert sum(1 for run in runs if run["state"] == "succeeded") == 3
    assert value(found, "promptui_run_duration_seconds_count", process="worker") == 3
    assert value(found, "promptui_dead_letters", process="broken") == status["dead_letter_count"]
    assert value(found, "promptui_queue_depth", process="worker") == 0
    assert value(found, "promptui_process_state", process="worker", state="running") == 1
    assert value(found, "promptui_process_state", process="broken", state="failed") == 0
    assert value(found, "promptui_events_total", process="worker", trigger_type="manual",
                 result="accepted") == 3
    tokens = value(found, "promptui_model_tokens_total", process="worker", model="scripted",
                   kind="output")
    assert tokens is not None and tokens > 0, sorted(k for k in found if "tokens" in k[0])
    commits = value(found, "promptui_journal_commit_seconds_count")
    assert commits is not None and commits > 0
    assert value(found, "promptui_journal_state", state="ok") == 1


def test_the_journal_holds_what_the_scrape_counted(tmp_path: Path) -> None:
    """The accepted events the scrape counts are the journal's ``event_accepted`` entries."""
    agents = write_agents(tmp_path, broken=False, judge=False)
    server = start_serve(tmp_path, str(agents), "--journal", str(tmp_path / "journal.db"))
    try:
        api = server.client()
        for n in range(4):
            assert api.post("/processes/worker/inject",
                            json={"payload": {"summary": f"task {n}"}}).status_code == 202

        def settled() -> Samples | None:
            found = samples(scrape(server.url, server.token).text)
            return found if value(found, "promptui_runs_total", process="worker",
                                  outcome="succeeded") == 4 else None

        found = poll(settled, 30, "four runs in the scrape")
        accepted = api.get("/processes/worker/journal",
                           params={"type": "event_accepted"}).json()
        ended = api.get("/processes/worker/journal", params={"type": "run_finished"}).json()
    finally:
        code = server.stop()
    assert code == 0, server.stderr()
    assert value(found, "promptui_events_total", process="worker", trigger_type="manual",
                 result="accepted") == len(accepted) == 4
    assert value(found, "promptui_runs_total", process="worker",
                 outcome="succeeded") == len(ended), [e.get("data") for e in ended]


GITHUB_HOOK = """\
version: "1.0"
name: gh
instructions: Do the task.
model:
  provider: scripted
  turns:
    - reply: Done.
journal: {level: checkpoint}
triggers:
  - {type: webhook, webhook_host: 127.0.0.1, webhook_port: 0, webhook_path: /github,
     signature_scheme: github, hmac_secret: metrics-test-secret,
     filter_expression: 'payload.action == "opened"'}
"""


def test_what_a_webhook_refused_is_counted_by_reason(tmp_path: Path) -> None:
    """A GitHub webhook: one delivery taken, its redelivery (duplicate), a bad signature
    (rejected) and an action the filter skips (filtered), each counted under its reason."""
    from tests.helpers.webhooks import github

    agents = tmp_path / "agents"
    agents.mkdir()
    (agents / "gh.agent").write_text(GITHUB_HOOK)
    server = start_serve(tmp_path, str(agents), "--journal", str(tmp_path / "journal.db"))
    try:
        port = next(int(t["port"]) for t in
                    server.client().get("/processes/gh/triggers").json())
        url = f"http://127.0.0.1:{port}/github"
        opened, closed = b'{"action": "opened"}', b'{"action": "closed"}'
        secret = "metrics-test-secret"
        statuses = [
            httpx.post(url, content=opened, headers=github(opened, secret, "d-1")).status_code,
            httpx.post(url, content=opened, headers=github(opened, secret, "d-1")).status_code,
            httpx.post(url, content=opened, headers=github(opened, "wrong", "d-2")).status_code,
            httpx.post(url, content=closed, headers=github(closed, secret, "d-3")).status_code,
        ]
        assert statuses == [202, 200, 401, 200], statuses
        found = samples(scrape(server.url, server.token).text)
    finally:
        assert server.stop() == 0, server.stderr()[-3000:]
    for reason in ("duplicate", "rejected", "filtered"):
        assert value(found, "promptui_events_refused_total", process="gh",
                     trigger_type="webhook", reason=reason) == 1, reason
