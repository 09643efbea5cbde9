"""OpenTelemetry traces of runs (runtime_core/tracing.py): a run span, a GenAI ``chat`` span per
model call, an ``execute_tool`` span per tool call, the journal commit of the run's end, and
the trace id kept on the run in the journal; nothing imported when tracing is off."""

from __future__ import annotations

import subprocess
import sys
import textwrap
import threading
from collections.abc import Iterator
from dataclasses import replace
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("opentelemetry.sdk")

from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import StatusCode

from runtime_core import AgentProcess, ProcessConfig, TriggerEvent, tool, tracing
from runtime_core.journal import EntryType, ReadFilter, SQLiteJournal
from tests.helpers.cli import finish_promptui
from tests.helpers.polling import wait_for


@pytest.fixture
def spans() -> Iterator[InMemorySpanExporter]:
    """A test provider handed to the seam, never the process-wide one; put back after."""
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    previous = tracing.use_tracer_provider(provider)
    yield exporter
    tracing.use_tracer_provider(previous)
    provider.shutdown()


def lookup(order: str) -> str:
    """Looks an order up."""
    return f"order {order}: shipped"


def one_tool_then_reply() -> dict[str, Any]:
    return {"provider": "scripted", "turns": [
        {"tool_calls": [{"name": "lookup", "args": {"order": "A-1"}}]},
        {"reply": "order A-1 has shipped"}]}


async def run_once(tmp_path: Path, model: dict[str, Any]) -> tuple[Any, list[dict[str, Any]]]:
    """One run of a journaled process; the run and the data of its start as journaled."""
    journal = SQLiteJournal(tmp_path / "journal.db")
    process = AgentProcess("orders", ProcessConfig(model=model, journal={"level": "checkpoint"}),
                           tools=[tool(lookup, effect="read")], journal=journal)
    await process.start()
    try:
        await process.inject(TriggerEvent("t", "manual", {"order": "A-1"}))
        await wait_for(lambda: process.recent_runs(), what="the run to finish")
        run = process.recent_runs()[-1]
        await journal.flush()
        started = [e.data for e in await journal.read(
            ReadFilter(process="orders", entry_type=EntryType.RUN_STARTED))]
        started += [e.data["started"] for e in await journal.read(
            ReadFilter(process="orders", entry_type=EntryType.RUN_FINISHED))
            if isinstance(e.data.get("started"), dict)]  # a start folded into the end
    finally:
        await process.stop()
        await journal.close()
    return run, started


def by_name(finished: tuple[ReadableSpan, ...], prefix: str) -> list[ReadableSpan]:
    return [s for s in finished if s.name.startswith(prefix)]


async def test_a_run_is_a_trace_of_its_model_and_tool_calls(
        tmp_path: Path, spans: InMemorySpanExporter) -> None:
    run, started = await run_once(tmp_path, one_tool_then_reply())
    assert run.state.value == "succeeded"
    await wait_for(lambda: by_name(spans.get_finished_spans(), "journal.commit"),
                   what="the run end's commit span")
    finished = spans.get_finished_spans()

    [root] = by_name(finished, "run ")
    assert root.name == "run orders"
    assert root.parent is None
    attrs = dict(root.attributes or {})
    assert attrs["promptui.process"] == "orders"
    assert attrs["promptui.trigger.type"] == "manual"
    assert attrs["promptui.run.id"] == run.run_id
    assert attrs["promptui.event.id"] == run.event.event_id
    assert attrs["promptui.run.outcome"] == "succeeded"
    assert root.status.status_code is not StatusCode.ERROR

    chats = by_name(finished, "chat ")
    assert len(chats) == 2  # one per model turn
    for chat in chats:
        gen = dict(chat.attributes or {})
        assert chat.name == "chat scripted"
        assert gen["gen_ai.operation.name"] == "chat"
        assert gen["gen_ai.system"] == gen["gen_ai.provider.name"] == "scripted"
        assert gen["gen_ai.request.model"] == "scripted"
        assert gen["gen_ai.usage.input_tokens"] == 0
        assert int(gen["gen_ai.usage.output_tokens"]) > 0  # type: ignore[arg-type]

    [call] = by_name(finished, "execute_tool ")
    tool_attrs = dict(call.attributes or {})
    assert call.name == "execute_tool lookup"
    assert tool_attrs["gen_ai.tool.name"] == "lookup"
    assert tool_attrs["promptui.tool.effect"] == "read"
    assert tool_attrs["promptui.tool.idempotency_key"] == f"{run.run_id}:2"
    assert tool_attrs["promptui.tool.outcome"] == "ok"

    [commit] = by_name(finished, "journal.commit")
    trace_id = root.context.trace_id
    for child in [*chats, call, commit]:
        assert child.context.trace_id == trace_id
        assert child.parent is not None and child.parent.span_id == root.context.span_id
    assert [s.start_time for s in sorted([*chats, call], key=lambda s: s.start_time)] == \
        [chats[0].start_time, call.start_time, chats[1].start_time]

    assert run.trace_id == f"{trace_id:032x}"
    assert [s.get("trace_id") for s in started] == [f"{trace_id:032x}"]


async def test_a_failing_run_has_an_error_status(tmp_path: Path,
                                                  spans: InMemorySpanExporter) -> None:
    run, started = await run_once(tmp_path, {"provider": "scripted",
                                             "turns": [{"raise": "model down"}]})
    assert run.state.value == "failed"
    await wait_for(lambda: by_name(spans.get_finished_spans(), "run "),
                   what="the run span")
    [root] = by_name(spans.get_finished_spans(), "run ")
    assert root.status.status_code is StatusCode.ERROR
    assert dict(root.attributes or {})["promptui.run.outcome"] == "failed"
    assert "model" in (root.status.description or "")
    [chat] = by_name(spans.get_finished_spans(), "chat ")
    assert chat.status.status_code is StatusCode.ERROR
    assert [s.get("trace_id") for s in started] == [f"{root.context.trace_id:032x}"]


async def test_untraced_runs_keep_no_trace_id(tmp_path: Path) -> None:
    run, started = await run_once(tmp_path, one_tool_then_reply())
    assert run.trace_id == ""
    assert started and all("trace_id" not in s for s in started)


@pytest.mark.slow
def test_tracing_off_imports_no_opentelemetry(tmp_path: Path) -> None:
    program = textwrap.dedent(f"""
        import asyncio, os, sys
        for name in ("OTEL_EXPORTER_OTLP_ENDPOINT", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"):
            os.environ.pop(name, None)
        from runtime_core import AgentProcess, ProcessConfig, TriggerEvent, tool
        from runtime_core.journal import SQLiteJournal

        def lookup(order: str) -> str:
            "Looks an order up."
            return "shipped"

        async def main() -> None:
            journal = SQLiteJournal({str(tmp_path / "j.db")!r})
            model = {{"provider": "scripted", "turns": [
                {{"tool_calls": [{{"name": "lookup", "args": {{"order": "A"}}}}]}},
                {{"reply": "done"}}]}}
            process = AgentProcess("p", ProcessConfig(model=model), journal=journal,
                                   tools=[tool(lookup, effect="read")])
            await process.start()
            await process.inject(TriggerEvent("t", "manual", {{}}))
            for _ in range(500):
                if process.recent_runs():
                    break
                await asyncio.sleep(0.01)
            print(process.recent_runs()[-1].state.value)
            await process.stop()
            await journal.close()

        asyncio.run(main())
        print(any(m == "opentelemetry" or m.startswith("opentelemetry.") for m in sys.modules))
    """)
    done = subprocess.run([sys.executable, "-c", program], capture_output=True, text=True,
                          timeout=60, cwd=Path(__file__).parents[2])
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["succeeded", "False"]


def test_the_run_header_shows_the_trace_id_only_when_there_is_one() -> None:
    from promptui.widgets.runs import run_header
    from runtime_core.control.views import RunView

    run = RunView("r" * 16, "e" * 16, "manual", "succeeded", "", "", "done", 1, None, None,
                  "", "")
    assert "trace" not in run_header(run).plain
    traced = replace(run, trace_id="4bf92f3577b34da6a3ce929d0e0e4736")
    assert "trace 4bf92f3577b34da6a3ce929d0e0e4736" in run_header(traced).plain


TICKER = """\
version: "1.0"
name: ticker
model:
  provider: scripted
  turns: [{reply: tick}]
triggers:
  - {type: interval, seconds: 0.2}
"""


@pytest.mark.slow
def test_promptui_exports_the_runs_of_the_demo_over_otlp(tmp_path: Path) -> None:
    received: list[tuple[str, bytes]] = []

    class Collector(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
            received.append((self.path, body))
            self.send_response(200)
            self.send_header("Content-Type", "application/x-protobuf")
            self.send_header("Content-Length", "0")
            self.end_headers()

        def log_message(self, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Collector)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        manifest = tmp_path / "ticker.agent"
        manifest.write_text(TICKER)
        done, _ = finish_promptui(["run", str(manifest), "--seconds", "2", "--json"], tmp_path,
                                  env={
            "OTEL_EXPORTER_OTLP_ENDPOINT": f"http://127.0.0.1:{server.server_port}",
            "OTEL_SERVICE_NAME": "promptui-test"})
    finally:
        server.shutdown()
        server.server_close()
    assert done.returncode == 0, done.stderr
    assert received, "no spans were exported (not flushed at exit?)"
    assert {path for path, _ in received} == {"/v1/traces"}
    body = b"".join(b for _, b in received)
    assert b"promptui-test" in body  # service.name from OTEL_SERVICE_NAME
    for name in (b"run ticker", b"chat scripted", b"gen_ai.usage.output_tokens",
                 b"promptui.run.outcome"):
        assert name in body


async def test_a_run_resumed_after_a_restart_goes_on_in_its_first_trace(
        tmp_path: Path, spans: InMemorySpanExporter) -> None:
    """A run parked on a write whose outcome is unknown, the process closed and a new one
    started on the same journal, the write reconciled: the run's second span is a child of
    its first, in the same trace, and the journal keeps the first trace id."""
    from runtime_core import OutcomeUnknown

    async def charge(order: str) -> str:
        """A write whose answer never comes."""
        raise OutcomeUnknown("the payment server did not answer")

    config = ProcessConfig(model={"provider": "scripted", "turns": [
        {"tool_calls": [{"name": "charge", "args": {"order": "A-1"}}]},
        {"reply": "charged"}]}, journal={"level": "checkpoint"})
    path = tmp_path / "journal.db"
    journal = SQLiteJournal(path)
    first = AgentProcess("orders", config, tools=[tool(charge, effect="write")],
                         journal=journal)
    await first.start()
    try:
        await first.inject(TriggerEvent("t", "manual", {"order": "A-1"}))
        parked = await wait_for(lambda: first.waiting_runs() or None, what="a parked write")
    finally:
        await first.shutdown()
        await journal.close()
    run_id = parked[0].run_id
    journal = SQLiteJournal(path)
    second = AgentProcess("orders", config, tools=[tool(charge, effect="write")],
                          journal=journal)
    await second.start()
    try:
        await wait_for(lambda: second.waiting_runs() or None, what="the run recovered")
        await second.reconcile(run_id, "applied", result="charged")
        await wait_for(lambda: [r for r in second.recent_runs() if r.run_id == run_id
                                and r.state.value == "succeeded"] or None,
                       what="the resumed run to finish")
    finally:
        await second.stop()
        await journal.close()
    runs = [s for s in by_name(spans.get_finished_spans(), "run ")
            if s.attributes and s.attributes.get("promptui.run.id") == run_id]
    assert len(runs) == 2, runs
    before, after = runs
    assert before.context is not None and after.context is not None
    assert after.context.trace_id == before.context.trace_id
    assert after.parent is not None and after.parent.span_id == before.context.span_id
    assert after.attributes is not None and after.attributes.get("promptui.run.resumed")
