"""``RemoteControl``: the control plane of a runtime served by ``promptui serve``, over HTTP
and its server-sent event stream. The control room and the CLI use it exactly as they use
``LocalControl``. When the server goes away the room keeps its last view, ``link`` says
"reconnecting", and the event stream resumes (with Last-Event-ID) once the server is back."""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import time
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any
from urllib.parse import quote, urlsplit

import httpx

from runtime_core.control.inject import check_idempotency_key
from runtime_core.control.plane import (
    ControlError,
    ControlPlane,
    Injected,
    QueuedOnStop,
    ReadOnlyError,
)
from runtime_core.control.pulse import BUCKET_SECONDS, WINDOW_SECONDS, PulseView
from runtime_core.control.sse import frames
from runtime_core.control.views import (
    DeadLetterView,
    IncidentView,
    JournalEntryView,
    ProcessDetail,
    ProcessSummary,
    RewindPlan,
    RewindResult,
    RunView,
)
from runtime_core.control.wire import event_from_dict, load, load_list
from runtime_core.events import BoundedBuffer

log = logging.getLogger(__name__)
LIST_TIMEOUT = 3.0  # the UI pump asks every tick: a hung server must not hold it for long
RETRY_SECONDS = (0.2, 0.5, 1.0, 2.0)  # then every 2 s: a loopback retry costs little


class RemoteStream(BoundedBuffer):
    """A bounded buffer the event-stream task fills; the oldest events go first when full."""

    def __init__(self, owner: RemoteControl, maxsize: int) -> None:
        super().__init__(maxsize)
        self._owner = owner

    def close(self) -> None:
        self._owner._streams.discard(self)


def _path(*parts: str) -> str:
    return "/" + "/".join(quote(part, safe="") for part in parts)


class RemoteControl:
    """The client of a runtime served by ``promptui serve`` (also importable as
    ``OrchestrationClient``): every command and view of the control plane over the HTTP API
    and its server-sent event stream, so the room and the CLI use it as they use a local
    runtime. ``async with OrchestrationClient(url, token=...) as client:`` then e.g.
    ``await client.inject(name, payload)``. When the server goes away, ``link`` says
    reconnecting and the event stream resumes (with Last-Event-ID) once it is back."""

    def __init__(self, url: str, *, token: str = "", read_only: bool = False,
                 timeout: float = 15.0, transport: httpx.AsyncBaseTransport | None = None
                 ) -> None:
        self.url = url.rstrip("/")
        parts = urlsplit(self.url)
        if parts.scheme not in ("http", "https") or not parts.netloc:
            raise ValueError(f"{url!r} is not a server URL; give one like "
                             "http://127.0.0.1:8765")
        self.where = parts.netloc
        headers = {"Authorization": f"Bearer {token}"} if token else {}
        self._client = httpx.AsyncClient(base_url=f"{self.url}/api/v1", headers=headers,
                                         timeout=timeout, trust_env=False, transport=transport)
        self._local_read_only = read_only
        self._server_read_only = False
        self._runtime_name = ""
        self.boot = ""
        self._streams: set[RemoteStream] = set()
        self._events_task: asyncio.Task[None] | None = None
        self._last_event_id = ""
        self._problem = ""
        self._problem_since: float | None = None
        self._summaries: list[ProcessSummary] = []
        self.reconnects = 0
        self._greeted = False  # the current event stream said hello

    # -- who and how ---------------------------------------------------------------------------
    @property
    def name(self) -> str:
        return f"{self._runtime_name} @ {self.where}" if self._runtime_name else self.where

    @property
    def read_only(self) -> bool:
        return self._local_read_only or self._server_read_only

    @property
    def link(self) -> str:
        if not self._problem:
            return ""
        since = self._problem_since or time.monotonic()
        return f"reconnecting ({time.monotonic() - since:.0f}s): {self._problem}"

    def _lost(self, why: str) -> None:
        if not self._problem:
            self._problem_since = time.monotonic()
        self._problem = why

    def _back(self) -> None:
        self._problem, self._problem_since = "", None

    async def runtime_info(self) -> dict[str, Any]:
        info: dict[str, Any] = await self._call("GET", "/runtime")
        self._runtime_name = str(info.get("name", ""))
        self._server_read_only = bool(info.get("read_only", False))
        self.boot = str(info.get("boot", ""))
        return info

    # -- requests ------------------------------------------------------------------------------
    async def _call(self, method: str, path: str, *, json_body: Any = None,
                    params: dict[str, Any] | None = None, wait: float | None = None,
                    text: bool = False, headers: dict[str, str] | None = None) -> Any:
        query = {k: v for k, v in (params or {}).items() if v is not None}
        try:
            answer = await self._client.request(
                method, path, json=json_body, params=query, headers=headers,
                timeout=wait if wait is not None else httpx.USE_CLIENT_DEFAULT)
        except httpx.TransportError as exc:
            why = str(exc) or type(exc).__name__
            self._lost(f"cannot reach {self.where}: {why}")
            raise ControlError(f"cannot reach the runtime at {self.url}: {why}",
                               "UNREACHABLE") from None
        if answer.status_code >= 400:
            if answer.status_code == 401:
                self._lost("the server refused the token")
            raise self._error(answer)
        if self._events_task is None or self._events_task.done():
            self._back()  # no stream to say so: a good answer is the news
        if answer.status_code == 204 or not answer.content:
            return None
        return answer.text if text else answer.json()

    def _error(self, answer: httpx.Response) -> ControlError:
        try:
            error = answer.json()["error"]
            code, message = str(error["code"]), str(error["message"])
        except (ValueError, KeyError, TypeError):
            code, message = "HTTP_ERROR", f"the server answered {answer.status_code}"
        if answer.status_code == 401:
            message = f"the server at {self.where} refused the token: {message}"
        if code == "READ_ONLY":
            return ReadOnlyError(message)
        return ControlError(message, code)

    # -- the event stream ----------------------------------------------------------------------
    def subscribe(self, maxsize: int = 10_000) -> RemoteStream:
        stream = RemoteStream(self, maxsize)
        self._streams.add(stream)
        self._ensure_events()
        return stream

    def _ensure_events(self) -> None:
        if self._events_task is not None and not self._events_task.done():
            return
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            return  # started by the first async call instead
        self._events_task = loop.create_task(self._follow_events(), name="promptui-sse")

    async def _follow_events(self) -> None:
        attempt = 0
        while True:
            self._greeted = False
            try:
                await self._read_events()
                why = "the event stream ended"
            except asyncio.CancelledError:
                raise
            except ControlError as exc:
                why = str(exc)
            except (httpx.HTTPError, OSError, ValueError) as exc:
                why = f"event stream: {exc or type(exc).__name__}"
            self._lost(why)
            attempt = 0 if self._greeted else attempt + 1  # a stream that worked starts over
            await asyncio.sleep(RETRY_SECONDS[min(attempt, len(RETRY_SECONDS) - 1)])
            self.reconnects += 1

    async def _read_events(self) -> None:
        headers = {"Last-Event-ID": self._last_event_id} if self._last_event_id else {}
        timeout = httpx.Timeout(10.0, read=45.0)  # keep-alives come every 15 s
        async with self._client.stream("GET", "/events", headers=headers,
                                       timeout=timeout) as answer:
            if answer.status_code != 200:
                await answer.aread()
                raise self._error(answer)
            async for frame in frames(answer.aiter_lines()):
                if frame.event == "hello":
                    self._greeted = True
                    self._back()
                    with contextlib.suppress(ControlError):
                        await self.runtime_info()
                elif self._streams:
                    event = event_from_dict(json.loads(frame.data))
                    for stream in list(self._streams):
                        stream.push(event)
                if frame.event_id:
                    self._last_event_id = frame.event_id

    # -- reads ---------------------------------------------------------------------------------
    async def list_processes(self) -> list[ProcessSummary]:
        """The last known list while the server is away, so the room keeps its view."""
        self._ensure_events()
        try:
            data = await self._call("GET", "/processes", wait=LIST_TIMEOUT)
        except ControlError as exc:
            if exc.code != "UNREACHABLE":
                raise
            return list(self._summaries)
        self._summaries = load_list(ProcessSummary, data)
        return list(self._summaries)

    async def process_detail(self, name: str) -> ProcessDetail:
        return load(ProcessDetail, await self._call("GET", _path("processes", name, "detail")))

    async def process_status(self, name: str) -> dict[str, Any]:
        data: dict[str, Any] = await self._call("GET", _path("processes", name))
        return data

    async def manifest_text(self, name: str) -> str:
        return str(await self._call("GET", _path("processes", name, "manifest"), text=True))

    async def waiting_detail(self, name: str, run_id: str) -> dict[str, Any]:
        data: dict[str, Any] = await self._call(
            "GET", _path("processes", name, "runs", run_id, "waiting"))
        return data

    async def runs(self, name: str, state: str | None = None) -> list[RunView]:
        return load_list(RunView, await self._call("GET", _path("processes", name, "runs"),
                                                   params={"state": state}))

    async def dead_letters(self, name: str, *, offset: int = 0, limit: int | None = None
                           ) -> list[DeadLetterView]:
        return load_list(DeadLetterView, await self._call(
            "GET", _path("processes", name, "dead-letters"),
            params={"offset": offset or None, "limit": limit}))

    async def journal_entries(self, name: str, *, before_seq: int | None = None,
                              at_or_before: float | None = None, entry_type: str | None = None,
                              text: str = "", limit: int = 200,
                              after_seq: int | None = None,
                              run_id: str | None = None) -> list[JournalEntryView]:
        params = {"before_seq": before_seq, "after_seq": after_seq,
                  "at_or_before": at_or_before, "type": entry_type or None,
                  "text": text or None, "run_id": run_id or None,
                  "limit": max(1, min(limit, 5000))}
        return load_list(JournalEntryView, await self._call(
            "GET", _path("processes", name, "journal"), params=params))

    async def journal_entry(self, name: str, entry_id: str) -> dict[str, Any]:
        found: dict[str, Any] = await self._call(
            "GET", _path("processes", name, "journal", entry_id))
        return found

    async def dead_letter(self, name: str, event_id: str) -> dict[str, Any]:
        found: dict[str, Any] = await self._call(
            "GET", _path("processes", name, "dead-letters", event_id))
        return found

    async def rewind_plan(self, name: str, entry_id: str, mode: str = "both") -> RewindPlan:
        return load(RewindPlan, await self._call(
            "GET", _path("processes", name, "rewind-plan"),
            params={"entry_id": entry_id, "mode": mode}))

    async def incidents(self, process: str | None = None) -> list[IncidentView]:
        return load_list(IncidentView, await self._call("GET", "/incidents",
                                                        params={"process": process}))

    async def pulse(self, name: str | None = None, *, window: int = WINDOW_SECONDS,
                    bucket: int = BUCKET_SECONDS) -> list[PulseView]:
        return load_list(PulseView, await self._call(
            "GET", "/pulse", params={"process": name, "window": window, "bucket": bucket}))

    async def cluster_nodes(self) -> list[Any]:
        """The cluster's nodes (a node of ``promptui serve --cluster``); a server that is not
        one answers NOT_A_CLUSTER."""
        try:
            found = await self._call("GET", "/cluster/nodes")
        except ControlError as exc:
            if exc.code in ("NOT_FOUND", "HTTP_ERROR"):
                raise ControlError(f"{self.where} is not a cluster node (promptui serve "
                                   "--cluster DSN starts one)", "NOT_A_CLUSTER") from None
            raise
        from runtime_core.control.cluster import NodeView  # only a cluster's room needs it

        return load_list(NodeView, found)

    async def forget_node(self, node_id: str) -> list[str]:
        """Forget a cluster node that is not live (its leases end); the processes released.
        ControlError REFUSED for a live node, NOT_FOUND for an unknown one."""
        self._mutating("forget a node")
        found = await self._call("DELETE", _path("cluster", "nodes", node_id))
        return [str(process) for process in found.get("leases_ended", [])]

    async def triggers(self, name: str) -> list[dict[str, Any]]:
        data: list[dict[str, Any]] = await self._call("GET", _path("processes", name,
                                                                  "triggers"))
        return data

    async def health_anomalies(self, name: str) -> list[dict[str, Any]] | None:
        data = await self._call("GET", _path("processes", name, "health", "anomalies"))
        anomalies: list[dict[str, Any]] = data["anomalies"]
        return anomalies if data.get("health_enabled") else None

    # -- commands ------------------------------------------------------------------------------
    def _mutating(self, what: str) -> None:
        if self.read_only:
            raise ReadOnlyError(f"{what} is not allowed: this control room is read-only")

    async def _command(self, what: str, name: str, action: str) -> None:
        self._mutating(what)
        await self._call("POST", _path("processes", name, action))

    async def start(self, name: str) -> None:
        await self._command("start", name, "start")

    async def stop(self, name: str, drain_timeout: float | None = None,
                   queued: QueuedOnStop = "keep") -> None:
        self._mutating("stop")
        # A drain holds the request open while runs finish: wait that long, and a bit more.
        wait = None if drain_timeout is None else drain_timeout + 30.0
        await self._call("POST", _path("processes", name, "stop"),
                         params={"drain_timeout": drain_timeout, "queued": queued}, wait=wait)

    async def restart(self, name: str) -> None:
        await self._command("restart", name, "restart")

    async def suspend(self, name: str) -> None:
        await self._command("suspend", name, "suspend")

    async def resume(self, name: str, *, watch_again: bool = False) -> None:
        self._mutating("resume")
        await self._call("POST", _path("processes", name, "resume"),
                         params={"watch_again": "true"} if watch_again else None)

    async def inject(self, name: str, payload: dict[str, Any],
                     trigger_type: str = "manual", *,
                     idempotency_key: str | None = None) -> str:
        return (await self._inject(name, payload, trigger_type, idempotency_key)).event_id

    async def inject_once(self, name: str, payload: dict[str, Any], trigger_type: str = "manual",
                          *, idempotency_key: str) -> Injected:
        return await self._inject(name, payload, trigger_type, idempotency_key)

    async def _inject(self, name: str, payload: dict[str, Any], trigger_type: str,
                      idempotency_key: str | None) -> Injected:
        self._mutating("inject")
        if not isinstance(payload, dict):
            raise ControlError("the payload must be a JSON object, e.g. {\"task\": \"check\"}")
        headers = None if idempotency_key is None else {  # checked here too: no bad request
            "Idempotency-Key": check_idempotency_key(idempotency_key)}
        data = await self._call("POST", _path("processes", name, "inject"),
                                json_body={"payload": payload, "trigger_type": trigger_type},
                                headers=headers)
        return Injected(str(data["event_id"]), replayed=bool(data.get("replayed", False)))

    async def redeliver(self, name: str, event_ids: Iterable[str] | None = None) -> int:
        self._mutating("redeliver")
        body = {"event_ids": list(event_ids)} if event_ids is not None else {}
        data = await self._call("POST", _path("processes", name, "dead-letters", "redeliver"),
                                json_body=body)
        return int(data["count"])

    async def clear_dead_letters(self, name: str) -> int:
        self._mutating("clear dead letters")
        data = await self._call("DELETE", _path("processes", name, "dead-letters"))
        return int(data["count"])

    async def reconcile(self, name: str, run_id: str, outcome: str, *, result: Any = None,
                        note: str = "") -> None:
        self._mutating("reconcile")
        await self._call("POST", _path("processes", name, "runs", run_id, "reconcile"),
                         json_body={"outcome": outcome, "result": result, "note": note})

    async def answer_evidence(self, name: str, run_id: str, action: str, *,
                              evidence: Any = None, note: str = "") -> None:
        self._mutating("answer evidence")
        await self._call("POST", _path("processes", name, "runs", run_id, "evidence"),
                         json_body={"action": action, "evidence": evidence, "note": note})

    async def answer_elicitation(self, name: str, run_id: str, action: str, *,
                                 content: dict[str, Any] | None = None) -> None:
        self._mutating("answer a server's question")
        await self._call("POST", _path("processes", name, "runs", run_id, "elicitation"),
                         json_body={"action": action, "content": content})

    async def rewind(self, name: str, entry_id: str, mode: str = "both") -> RewindResult:
        self._mutating("rewind")
        return load(RewindResult, await self._call(
            "POST", _path("processes", name, "rewind"),
            json_body={"entry_id": entry_id, "mode": mode}))

    async def fork(self, name: str, entry_id: str, new_name: str, *,
                   with_triggers: bool = False) -> str:
        self._mutating("fork")
        data = await self._call("POST", _path("processes", name, "fork"), json_body={
            "entry_id": entry_id, "new_name": new_name, "with_triggers": with_triggers})
        return str(data["name"])

    async def resolve_incident(self, name: str, incident_id: str, *, generation: int,
                               version: int, note: str = "") -> IncidentView:
        self._mutating("resolve incident")
        return load(IncidentView, await self._call(
            "POST", _path("processes", name, "incidents", incident_id, "resolve"),
            json_body={"generation": generation, "version": version, "note": note}))

    async def reopen_incident(self, name: str, incident_id: str, *, generation: int,
                              version: int, note: str = "") -> IncidentView:
        self._mutating("reopen incident")
        return load(IncidentView, await self._call(
            "POST", _path("processes", name, "incidents", incident_id, "reopen"),
            json_body={"generation": generation, "version": version, "note": note}))

    async def add_trigger(self, name: str, config: dict[str, Any]) -> str:
        self._mutating("add trigger")
        data = await self._call("POST", _path("processes", name, "triggers"), json_body=config)
        return str(data["trigger_id"])

    async def remove_trigger(self, name: str, trigger_id: str) -> None:
        self._mutating("remove trigger")
        await self._call("DELETE", _path("processes", name, "triggers", trigger_id))

    async def clear_health_anomalies(self, name: str) -> int:
        self._mutating("clear anomalies")
        data = await self._call("DELETE", _path("processes", name, "health", "anomalies"))
        return int(data["anomalies_cleared"])

    async def update_health(self, name: str, patch: dict[str, Any] | None = None,
                            **fields: Any) -> dict[str, Any]:
        """``fields`` join ``patch`` (the spec's client: update_health(name, error_window=20))."""
        self._mutating("change health config")
        data = await self._call("PATCH", _path("processes", name, "health"),
                                json_body={**(patch or {}), **fields})
        health: dict[str, Any] = data["health"]
        return health

    # -- the session ---------------------------------------------------------------------------
    async def start_all(self) -> None:
        """Attach: learn who the server is and follow its events. The server started its
        processes itself; attaching never starts or stops them."""
        await self.runtime_info()
        self._ensure_events()

    async def __aenter__(self) -> RemoteControl:
        """Checks the server and the token at once (ControlError when either is wrong)."""
        await self.runtime_info()
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.close()

    async def close(self) -> None:
        """Detach. The server's runtime keeps running."""
        task, self._events_task = self._events_task, None
        if task is not None:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task
        await self._client.aclose()


if TYPE_CHECKING:  # the one protocol the room and the CLI use
    def _is_a_control_plane(remote: RemoteControl) -> ControlPlane:
        return remote


#: The spec's name for the client of a served runtime: ``async with OrchestrationClient(url,
#: token=...) as client: await client.update_health(name, error_window=20)``.
OrchestrationClient = RemoteControl
