"""``promptui serve`` as a real subprocess on 127.0.0.1 port 0: every route of the control API
with a valid token, the guard's refusals, a read-only server, the resumable SSE stream, a
SIGTERM that keeps queued events for the next start, and the token file."""

from __future__ import annotations

import json
import os
import signal
import subprocess
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.helpers.cli import promptui_command
from tests.helpers.polling import poll
from tests.helpers.serving import Served, start_serve, write_agents

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    folder = tmp_path_factory.mktemp("serve")
    agents = write_agents(folder)
    server = start_serve(folder, str(agents), "--journal", str(folder / "journal.db"),
                         "--max-body", "65536")
    yield server
    assert server.stop() == 0, server.stderr()


def ok(response: httpx.Response, status: int = 200) -> Any:
    assert response.status_code == status, (response.request.method, response.request.url,
                                            response.status_code, response.text)
    return response.json()


def refused(response: httpx.Response, status: int, code: str) -> str:
    assert response.status_code == status, (response.request.url, response.text)
    error = response.json()["error"]
    assert error["code"] == code, error
    message: str = error["message"]
    return message


class Routes:
    """Calls routes by their OpenAPI template and remembers which ones were called."""

    def __init__(self, client: httpx.Client) -> None:
        self.client = client
        self.called: set[tuple[str, str]] = set()

    def __call__(self, method: str, template: str, *, path: dict[str, str] | None = None,
                 **kwargs: Any) -> httpx.Response:
        self.called.add((method.lower(), template))
        url = template.removeprefix("/api/v1").format(**(path or {}))
        return self.client.request(method, url, **kwargs)


def run_of(call: Routes, name: str, event_id: str, states: tuple[str, ...]
           ) -> dict[str, Any] | None:
    runs = ok(call("GET", "/api/v1/processes/{name}/runs", path={"name": name}))
    return next((r for r in runs if r["event_id"] == event_id and r["state"] in states), None)


def test_every_route_answers_with_a_valid_token(served: Served) -> None:
    call = Routes(served.client())
    p = {"name": "worker"}
    assert ok(call("GET", "/api/v1/health", headers={"Authorization": ""})) == {"status": "ok"}
    info = ok(call("GET", "/api/v1/runtime"))
    assert info["read_only"] is False and info["process_count"] == 3 and info["boot"]
    listed = ok(call("GET", "/api/v1/processes"))
    assert {row["name"] for row in listed} == {"worker", "broken", "judge"}
    assert ok(call("GET", "/api/v1/processes/{name}", path=p))["state"] == "running"
    detail = ok(call("GET", "/api/v1/processes/{name}/detail", path=p))
    manifest = call("GET", "/api/v1/processes/{name}/manifest", path=p)
    assert manifest.status_code == 200 and "name:" in manifest.text, manifest.text
    assert detail["summary"]["name"] == "worker" and "health" in detail["config"]

    # a run, its journal, a rewind plan, the rewind and a fork
    event_id = ok(call("POST", "/api/v1/processes/{name}/inject", path=p,
                       json={"payload": {"task": "a"}}), 202)["event_id"]
    poll(lambda: run_of(call, "worker", event_id, ("succeeded",)), what="worker's run")
    assert ok(call("GET", "/api/v1/processes/{name}/runs", path=p,
                   params={"state": "succeeded"}))[0]["reply"] == "Done."
    journal = "/api/v1/processes/{name}/journal"
    entries = ok(call("GET", journal, path=p, params={"limit": 50}))
    seqs = [e["seq"] for e in entries]
    assert seqs == sorted(seqs, reverse=True) and len(seqs) >= 3
    # A run that called no tool writes one entry, its end (its start folded in).
    starts = ok(call("GET", journal, path=p, params={"type": "run_finished"}))
    assert len(starts) == 1 and starts[0]["entry_id"].startswith("worker:")
    assert [e["seq"] for e in ok(call("GET", journal, path=p, params={
        "after_seq": seqs[2]}))] == seqs[:2]
    assert [e["seq"] for e in ok(call("GET", journal, path=p, params={
        "before_seq": seqs[0], "limit": 2}))] == seqs[1:3]
    assert ok(call("GET", journal, path=p, params={"at_or_before": 1.0})) == []
    pulse = ok(call("GET", "/api/v1/pulse", params={"process": "worker"}))
    assert [view["process"] for view in pulse] == ["worker"] and sum(pulse[0]["runs"]) >= 1
    assert len(ok(call("GET", "/api/v1/pulse"))) == 3  # every process
    assert ok(call("GET", journal, path=p, params={"text": "no-such-text-anywhere"})) == []
    target = starts[0]["entry_id"]
    run_entries = ok(call("GET", journal, path=p, params={"run_id": starts[0]["run_id"]}))
    assert {e["run_id"] for e in run_entries} == {starts[0]["run_id"]} and len(run_entries) >= 1
    whole = ok(call("GET", journal + "/{entry_id}", path={**p, "entry_id": target}))
    assert whole["entry_id"] == target and whole["data"]["event_id"] == event_id
    refused(call("GET", journal + "/{entry_id}", path={**p, "entry_id": "worker:99999"}), 404,
            "NOT_FOUND")
    plan = ok(call("GET", "/api/v1/processes/{name}/rewind-plan", path=p,
                   params={"entry_id": target, "mode": "both"}))
    assert (plan["process"], plan["target_entry_id"]) == ("worker", target)
    assert plan["messages_dropped"] >= 1  # the run's conversation
    rewound = ok(call("POST", "/api/v1/processes/{name}/rewind", path=p,
                      json={"entry_id": target, "mode": "both"}))
    assert rewound["rewind_entry_id"].startswith("worker:") and rewound["conversation"] == []
    forked = ok(call("POST", "/api/v1/processes/{name}/fork", path=p,
                     json={"entry_id": target, "new_name": "worker-b"}), 201)
    assert forked == {"name": "worker-b", "forked_from": "worker"}

    # commands, on the fork
    b = {"name": "worker-b"}
    assert poll(lambda: ok(call("GET", "/api/v1/processes/{name}", path=b))["state"]
                == "running", what="the fork running")
    for action, state in (("suspend", "suspended"), ("resume", "running"),
                          ("stop", "stopped"), ("start", "running"), ("restart", "running")):
        done = ok(call("POST", f"/api/v1/processes/{{name}}/{action}", path=b))
        assert done == {"name": "worker-b", "state": state}, action
    refused(call("POST", "/api/v1/processes/{name}/start", path=b), 409, "REFUSED")
    refused(call("GET", "/api/v1/processes/{name}", path={"name": "nope"}), 404,
            "PROCESS_NOT_FOUND")

    # triggers
    triggers = "/api/v1/processes/{name}/triggers"
    assert ok(call("GET", triggers, path=p)) == []
    added = ok(call("POST", triggers, path=p, json={"type": "interval", "seconds": 3600}), 201)
    trigger_id = added["trigger_id"]
    assert [t["id"] for t in ok(call("GET", triggers, path=p))] == [trigger_id]
    one = {**p, "trigger_id": trigger_id}
    assert ok(call("DELETE", triggers + "/{trigger_id}", path=one))["trigger_id"] == trigger_id
    refused(call("DELETE", triggers + "/{trigger_id}", path=one), 404, "TRIGGER_NOT_FOUND")
    refused(call("POST", triggers, path=p, json={"type": "interval", "secnds": 5}), 422,
            "INVALID_CONFIG")

    # dead letters: the broken process's events fail and land there
    d = {"name": "broken"}
    dead = "/api/v1/processes/{name}/dead-letters"
    first = ok(call("POST", "/api/v1/processes/{name}/inject", path=d,
                    json={"payload": {"build": 1}, "trigger_type": "event"}), 202)["event_id"]
    letters = poll(lambda: ok(call("GET", dead, path=d)), what="a dead letter")
    assert [x["event_id"] for x in letters] == [first]
    assert "refused the connection" in letters[0]["error"]
    letter = ok(call("GET", dead + "/{event_id}", path={**d, "event_id": first}))
    assert letter["event"]["payload"] == {"build": 1} and letter["reason"] == "retries exhausted"
    refused(call("GET", dead + "/{event_id}", path={**d, "event_id": "nope"}), 404, "NOT_FOUND")
    assert ok(call("POST", dead + "/redeliver", path=d, json={"event_ids": [first]})) == \
        {"name": "broken", "count": 1}
    poll(lambda: ok(call("GET", dead, path=d)), what="the redelivered event dead again")
    assert ok(call("POST", dead + "/redeliver", path=d))["count"] == 1  # no body: all
    poll(lambda: ok(call("GET", dead, path=d)), what="dead again")
    assert ok(call("DELETE", dead, path=d)) == {"name": "broken", "count": 1}
    assert ok(call("GET", dead, path=d)) == []

    # a run waiting for completion evidence: its detail, a refused reconcile, then failed
    j = {"name": "judge"}
    asked = ok(call("POST", "/api/v1/processes/{name}/inject", path=j,
                    json={"payload": {"q": 1}}), 202)["event_id"]
    run = poll(lambda: run_of(call, "judge", asked, ("waiting",)), what="a waiting run")
    r = {**j, "run_id": run["run_id"]}
    # (the run shows "waiting" a moment before its wait is registered: poll for the detail)
    waiting = poll(lambda: call("GET", "/api/v1/processes/{name}/runs/{run_id}/waiting",
                                path=r).json().get("missing"), what="the wait's detail")
    assert "solution" in json.dumps(waiting)
    message = refused(call("POST", "/api/v1/processes/{name}/runs/{run_id}/reconcile", path=r,
                           json={"outcome": "applied", "result": "ok"}), 409, "REFUSED")
    assert "evidence" in message
    message = refused(call("POST", "/api/v1/processes/{name}/runs/{run_id}/elicitation",
                           path=r, json={"action": "cancel"}), 409, "REFUSED")
    assert "not for the answer to a server's question" in message
    assert ok(call("POST", "/api/v1/processes/{name}/runs/{run_id}/evidence", path=r,
                   json={"action": "failed", "note": "no answer"}))["action"] == "failed"
    poll(lambda: run_of(call, "judge", asked, ("failed",)), what="the run failed")

    # health
    health = "/api/v1/processes/{name}/health"
    assert ok(call("GET", health + "/anomalies", path=p)) == {
        "name": "worker", "health_enabled": True, "anomalies": [], "count": 0}
    assert ok(call("DELETE", health + "/anomalies", path=p))["anomalies_cleared"] == 0
    patched = ok(call("PATCH", health, path=p, json={"stuck_threshold": 5}))
    assert patched["health"]["stuck_threshold"] == 5 and patched["live"] is True
    assert ok(call("GET", health + "/anomalies", path=j))["health_enabled"] is False

    # incidents: a webhook-typed event opens one; resolve, then reopen
    ok(call("POST", "/api/v1/processes/{name}/inject", path=p,
            json={"payload": {"summary": "disk full"}, "trigger_type": "webhook"}), 202)
    opened = poll(lambda: ok(call("GET", "/api/v1/incidents")), what="an incident")
    assert [(i["process"], i["state"], i["fingerprint"]) for i in opened] == \
        [("worker", "open", "disk full")]
    i = {**p, "incident_id": opened[0]["incident_id"]}
    version = {"generation": opened[0]["generation"], "version": opened[0]["version"]}
    resolved = ok(call("POST", "/api/v1/processes/{name}/incidents/{incident_id}/resolve",
                       path=i, json={**version, "note": "cleaned up"}))
    assert resolved["state"] == "resolved"
    refused(call("POST", "/api/v1/processes/{name}/incidents/{incident_id}/resolve", path=i,
                 json={**version, "note": "stale"}), 409, "REFUSED")
    reopened = ok(call("POST", "/api/v1/processes/{name}/incidents/{incident_id}/reopen",
                       path=i, json={"generation": resolved["generation"],
                                     "version": resolved["version"]}))
    assert reopened["state"] == "open" and reopened["generation"] == version["generation"] + 1
    assert len(ok(call("GET", "/api/v1/incidents", params={"process": "worker"}))) == 1

    # the reference runtime's paths served as aliases (runtime_core/api/reference_routes.py)
    status = ok(call("GET", "/api/v1/runtime/status"))
    assert {"worker", "broken", "judge"} <= set(status["processes"]), status
    for alias in ("metrics", "context", "mission", "inbox"):
        assert call("GET", f"/api/v1/processes/{{name}}/{alias}", path=p).status_code in \
            (200, 404), alias  # 404: the part is off for this process, said as an error
    entry = starts[0]["entry_id"]
    plan = ok(call("GET", "/api/v1/processes/{name}/rewind/plan", path=p,
                   params={"target_entry_id": entry, "mode": "code_only"}))
    assert plan, plan
    ok(call("POST", "/api/v1/runtime/stop-all"))
    assert ok(call("GET", "/api/v1/processes/{name}", path=p))["state"] == "stopped"
    ok(call("POST", "/api/v1/runtime/start-all"))
    assert ok(call("GET", "/api/v1/processes/{name}", path=p))["state"] == "running"

    # the event stream answers (its behaviour is tested below), and the schema lists nothing
    # this test did not call
    with call.client.stream("GET", "/events") as stream:
        assert stream.status_code == 200
        assert stream.headers["content-type"].startswith("text/event-stream")
    call.called.add(("get", "/api/v1/events"))
    schema = ok(call.client.get("/openapi.json"))
    routes = {(method, path) for path, item in schema["paths"].items() for method in item}
    assert routes - call.called == set()


def test_the_guard_refuses_before_any_route(served: Served) -> None:
    url = "/processes"
    refused(served.client(token="").get(url), 401, "UNAUTHORIZED")
    wrong = served.client(token="x" * 43).get(url)
    refused(wrong, 401, "UNAUTHORIZED")
    assert wrong.headers["www-authenticate"] == "Bearer"
    refused(served.client(token="").get("/no-such-route"), 401, "UNAUTHORIZED")
    refused(served.client(Host="evil.example").get(url), 421, "MISDIRECTED_REQUEST")
    refused(served.client(Host="evil.example:80").get("/health"), 421, "MISDIRECTED_REQUEST")
    refused(served.client(Origin="http://localhost:3000").get(url), 403,
            "CROSS_ORIGIN_REFUSED")
    client = served.client()
    assert client.get(url, headers={"Host": "localhost"}).status_code == 200
    body = {"payload": {"blob": "x" * 70_000}}
    refused(client.post("/processes/worker/inject", json=body), 413, "BODY_TOO_LARGE")

    # a live health patch is checked as a whole: a failed one changes nothing
    def health_config() -> Any:
        return ok(client.get("/processes/worker/detail"))["config"].get("health")

    before = health_config()
    message = refused(client.patch("/processes/worker/health", json={
        "on_anomaly": "stop", "escalation": {"event_type": "x", "bogus": 1}}), 422,
        "UNKNOWN_FIELD")
    assert "escalation.bogus" in message
    message = refused(client.patch("/processes/worker/health", json={
        "on_anomaly": "stop", "stuck_threshold": 1}), 422, "INVALID_CONFIG")
    assert "stuck_threshold" in message
    refused(client.patch("/processes/worker/health", json={"loop_window": "20"}), 422,
            "INVALID_CONFIG")  # strict JSON types: no string for a number
    assert health_config() == before
    assert before.get("on_anomaly") != "stop"
    refused(client.post("/processes/worker/inject", json={"payload": [1]}), 422,
            "INVALID_REQUEST")
    refused(client.get("/processes/worker/journal", params={"limit": 0}), 422,
            "INVALID_REQUEST")


def test_what_the_journal_cannot_hold_is_refused_up_front(served: Served) -> None:
    """Found probing the API: each of these answered 500, and a lone surrogate in a payload
    failed the shared SQLite journal for every process until the server stopped."""
    client = served.client()
    huge = 2**70
    for param in ("before_seq", "after_seq"):
        refused(client.get("/processes/worker/journal", params={param: huge}), 422,
                "INVALID_REQUEST")
    message = refused(client.get("/processes/worker/rewind-plan",
                                 params={"entry_id": f"worker:{huge}"}), 409, "REFUSED")
    assert "no journal entry" in message
    refused(client.post("/processes/worker/rewind", json={"entry_id": f"worker:{huge}"}), 409,
            "REFUSED")
    refused(client.post("/processes/worker/fork", json={"entry_id": "worker:1",
                                                        "new_name": "a b/c"}), 422,
            "INVALID_REQUEST")
    refused(client.get("/processes/nope/rewind-plan", params={"entry_id": "nope:1"}), 404,
            "PROCESS_NOT_FOUND")
    raw = {"content-type": "application/json"}
    for body in (b'{"payload": {"text": "\\ud800"}}', b'{"payload": {"x": NaN}}',
                 b'{"payload": {"x": 1e999}}', b'{"payload": {"n": %d}}' % huge,
                 b'{"payload": {}, "trigger_type": "\\udfff"}'):
        message = refused(client.post("/processes/worker/inject", content=body, headers=raw),
                          422, "INVALID_REQUEST")
        assert "payload" in message or "trigger_type" in message or "surrogate" in message
    before = ok(client.get("/processes/worker/detail"))["config"].get("health")
    for patch in ({"loop_window": 10**9}, {"stuck_threshold": huge}):
        refused(client.patch("/processes/worker/health", json=patch), 422,
                "INVALID_CONFIG" if patch.get("loop_window") else "INVALID_REQUEST")
    assert ok(client.get("/processes/worker/detail"))["config"].get("health") == before
    # the journal still takes every process's entries
    event_id = ok(client.post("/processes/worker/inject", json={"payload": {"text": "é ✓"}}),
                  202)["event_id"]
    poll(lambda: run_of(Routes(client), "worker", event_id, ("succeeded",)), what="a run")
    assert ok(client.get("/processes/worker/journal", params={"limit": 1}))


def read_frames(lines: Iterator[str], until: Callable[[dict[str, Any]], bool],
                limit: int = 500) -> list[dict[str, Any]]:
    """SSE frames (id, event, data) up to and including the first one ``until`` accepts;
    ``lines`` is one stream's ``iter_lines()``, read on from where the last call stopped."""
    frames: list[dict[str, Any]] = []
    frame: dict[str, Any] = {}
    for line in lines:
        if line.startswith(":"):
            continue
        if line:
            key, _, value = line.partition(": ")
            frame[key] = json.loads(value) if key == "data" else value
            continue
        if frame:
            frames.append(frame)
            if until(frame) or len(frames) >= limit:
                return frames
            frame = {}
    pytest.fail(f"the event stream ended after {len(frames)} frames")


def seq_of(frame: dict[str, Any]) -> int:
    return int(frame["id"].rpartition("-")[2])


def finished(event_id: str) -> Callable[[dict[str, Any]], bool]:
    return lambda f: f.get("event") == "run.finished" and f["data"]["event_id"] == event_id


def test_event_stream_resumes_with_last_event_id(served: Served) -> None:
    client = served.client()

    def inject(task: str) -> str:
        event_id: str = ok(client.post("/processes/worker/inject",
                                       json={"payload": {"task": task}}), 202)["event_id"]
        return event_id

    with client.stream("GET", "/events") as stream:
        lines = stream.iter_lines()
        hello = read_frames(lines, lambda f: True)[0]
        assert hello["event"] == "hello" and hello["data"]["missed"] == 0
        boot = hello["data"]["boot"]
        first = inject("before the disconnect")
        seen = read_frames(lines, finished(first))
    kinds = [f["event"] for f in seen]
    assert "run.started" in kinds and kinds[-1] == "run.finished"
    assert [seq_of(f) for f in seen] == list(range(seq_of(hello) + 1, seq_of(seen[-1]) + 1))
    last_id = seen[-1]["id"]

    missed = [inject("while away 1"), inject("while away 2")]
    poll(lambda: all(run_of(Routes(client), "worker", e, ("succeeded",)) for e in missed),
         what="the runs while away")
    # A run reads as succeeded once its journal entry is in, and its run.finished reaches
    # the event log a moment later: so read on until both finishes arrive, not to a tip
    # taken from a snapshot that may predate the second one.
    ids: set[str] = set()

    def both_finished(frame: dict[str, Any]) -> bool:
        if frame["event"] == "run.finished":
            ids.add(frame["data"].get("event_id"))
        return set(missed) <= ids

    with client.stream("GET", "/events", headers={"Last-Event-ID": last_id}) as stream:
        hello, *frames = read_frames(stream.iter_lines(), both_finished)
    assert hello["event"] == "hello" and hello["data"] == {"boot": boot, "missed": 0}
    assert hello["id"] == last_id
    # exactly what came after the last id seen: dense numbers, none again, none lost
    tip = seq_of(frames[-1])
    assert [seq_of(f) for f in frames] == list(range(seq_of(seen[-1]) + 1, tip + 1))
    assert all(f["id"].startswith(f"{boot}-") for f in frames)
    assert set(missed) <= ids and first not in ids  # read_frames stops at 500 frames too

    # an id from another boot (a restarted server) gets everything the log still holds
    with client.stream("GET", "/events", headers={"Last-Event-ID": "0000-5"}) as stream:
        hello, *frames = read_frames(stream.iter_lines(), lambda f: f["event"] != "hello"
                                     and seq_of(f) >= tip)
    assert hello["data"]["boot"] == boot and seq_of(frames[0]) == 1


def test_read_only_server_answers_reads_only(tmp_path: Path) -> None:
    agents = write_agents(tmp_path, broken=False, judge=False)
    server = start_serve(tmp_path, str(agents), "--read-only", "--log-format", "json",
                         "--journal", str(tmp_path / "journal.db"))
    client = server.client()
    assert ok(client.get("/runtime"))["read_only"] is True
    assert [p["state"] for p in ok(client.get("/processes"))] == ["running"]
    assert ok(client.get("/processes/worker/journal")) is not None
    refused(client.post("/processes/worker/suspend"), 403, "READ_ONLY")
    refused(client.post("/processes/worker/inject", json={"payload": {}}), 403, "READ_ONLY")
    refused(client.patch("/processes/worker/health", json={"stuck_threshold": 5}), 403,
            "READ_ONLY")
    assert ok(client.get("/processes/worker"))["state"] == "running"
    assert server.stop(signal.SIGINT) == 0, server.stderr()  # Ctrl+C stops it cleanly
    lines = server.stderr().splitlines()
    logged = [json.loads(line) for line in lines if line.startswith("{")]
    assert logged and all({"time", "level", "logger", "message"} <= set(r) for r in logged)
    assert any(r["logger"].startswith("uvicorn") for r in logged)
    assert lines[-1].startswith("promptui serve: stopped cleanly")
    assert not (tmp_path / ".promptui" / "serve.json").exists()


def test_sigterm_keeps_queued_events_for_the_next_start(tmp_path: Path) -> None:
    agents = write_agents(tmp_path, worker_names=("parked",), broken=False, judge=False)
    args = (str(agents), "--journal", str(tmp_path / "journal.db"))
    server = start_serve(tmp_path, *args)
    client = server.client()
    assert ok(client.post("/processes/parked/suspend"))["state"] == "suspended"
    injected = [ok(client.post("/processes/parked/inject", json={"payload": {"n": n}}),
                   202)["event_id"] for n in range(5)]
    detail = ok(client.get("/processes/parked/detail"))
    assert [q["event_id"] for q in detail["queued"]] == injected
    assert server.stop(signal.SIGTERM) == 0, server.stderr()
    assert server.stderr().splitlines()[-1] == (
        "promptui serve: stopped cleanly; 5 queued or running event(s) are kept in the journal "
        "for the next start, 0 dead letter(s) for redelivery")
    assert not (tmp_path / ".promptui" / "serve.json").exists()

    # The next start takes them back by itself, in order, and runs each exactly once: a
    # SIGTERM is a restart of the service, not an operator's stop (which dead-letters). The
    # operator's suspension is kept by the restart: they run once it is resumed.
    again = start_serve(tmp_path, *args, log_name="serve2.log")
    client = again.client()
    kept = ok(client.get("/processes/parked/detail"))
    assert kept["summary"]["state"] == "suspended", kept["summary"]
    assert [q["event_id"] for q in kept["queued"]] == injected
    assert ok(client.post("/processes/parked/resume"))["state"] == "running"

    def succeeded() -> list[str]:
        return [r["event_id"] for r in ok(client.get("/processes/parked/runs",
                                                     params={"state": "succeeded"}))]

    poll(lambda: set(succeeded()) >= set(injected), what="every event run after the restart")
    assert sorted(succeeded()) == sorted(injected)
    assert ok(client.get("/processes/parked/dead-letters")) == []
    accepted = [e["summary"] for e in reversed(ok(client.get(
        "/processes/parked/journal", params={"type": "run_finished", "limit": 50})))]
    assert [next(i for i in injected if i[:8] in line) for line in accepted] == injected
    assert again.stop() == 0, again.stderr()


def test_token_file_is_private_reused_and_overridden_by_env(tmp_path: Path) -> None:
    agents = write_agents(tmp_path, broken=False, judge=False)
    first = start_serve(tmp_path, str(agents), "--journal", str(tmp_path / "journal.db"))
    token_file = tmp_path / ".promptui" / "token"
    assert token_file.stat().st_mode & 0o777 == 0o600
    discovery = tmp_path / ".promptui" / "serve.json"
    assert discovery.stat().st_mode & 0o777 == 0o600
    assert json.loads(discovery.read_text())["token_file"] == str(token_file)
    assert first.ready_line.endswith("(token in .promptui/token)")
    assert ok(first.client().get("/processes"))
    assert first.stop() == 0, first.stderr()

    second = start_serve(tmp_path, str(agents), "--journal", str(tmp_path / "journal.db"))
    assert second.token == first.token  # the same file, the same token
    assert ok(second.client().get("/runtime"))["process_count"] == 1
    assert second.stop() == 0, second.stderr()

    from_env = "env-token-" + "z" * 24
    third = start_serve(tmp_path, str(agents), "--journal", str(tmp_path / "journal.db"),
                        token=from_env)
    assert third.ready_line.endswith("(token from PROMPTUI_TOKEN)")
    assert json.loads(discovery.read_text())["token_file"] is None
    assert ok(third.client().get("/runtime"))
    refused(third.client(token=first.token).get("/runtime"), 401, "UNAUTHORIZED")
    assert third.stop() == 0, third.stderr()
    assert token_file.read_text().strip() == first.token  # the env never rewrote the file


def test_refuses_to_start_on_a_token_file_others_can_read(tmp_path: Path) -> None:
    token_file = tmp_path / "token"
    token_file.write_text("t" * 40)
    token_file.chmod(0o644)
    env = {k: v for k, v in os.environ.items() if k != "PROMPTUI_TOKEN"}
    result = subprocess.run([*promptui_command(), "serve", "--port", "0", "--token-file",
                             str(token_file), str(write_agents(tmp_path))],
                            capture_output=True, text=True, timeout=60, cwd=tmp_path, env=env)
    assert result.returncode == 2, result.stderr
    assert "chmod 600" in result.stderr and "readable by others" in result.stderr
