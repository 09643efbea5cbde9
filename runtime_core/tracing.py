"""OpenTelemetry traces of runs: the seam the run loop calls, a no-op when tracing is off.

Every run is a trace when tracing is on: a ``run {process}`` span, a ``chat {model}`` span per
model call (OpenTelemetry GenAI semantic conventions), an ``execute_tool {tool}`` span per tool
call, and a ``journal.commit run_finished`` span from the submit of the run's end to its group
commit (commits are batched across runs, so the span marks this run's wait, not a commit of its
own).

Tracing is on when one of these holds, checked at each run's start (the variables are read
once, at the first):

* a provider was handed to :func:`use_tracer_provider` (tests, or an embedder that does not want
  to touch the global provider);
* ``OTEL_EXPORTER_OTLP_ENDPOINT`` (or ``OTEL_EXPORTER_OTLP_TRACES_ENDPOINT``) is set and a
  non-default global TracerProvider is set (the hosts set one up with
  :func:`configure_from_env`);
* the embedding program already imported ``opentelemetry`` and set a global TracerProvider.

Otherwise nothing here imports ``opentelemetry`` and each hook returns a shared no-op object.
"""

from __future__ import annotations

import logging
import os
import sys
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager
from contextvars import ContextVar
from typing import Any

log = logging.getLogger(__name__)

#: The variables that switch the OTLP exporter on (the standard OpenTelemetry ones).
ENDPOINT_VARIABLES = ("OTEL_EXPORTER_OTLP_ENDPOINT", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT")
SERVICE_NAME = "promptui"
_SCOPE = "runtime_core"

_injected: Any = None  # a TracerProvider handed in by use_tracer_provider
_missing_warned = False
#: The tracer of the run this task is executing (None: not traced).
_run_tracer: ContextVar[Any] = ContextVar("runtime_core_run_tracer", default=None)


_endpoint: bool | None = None  # whether an endpoint variable is set, read once (os.environ is slow)


def _endpoint_set() -> bool:
    global _endpoint
    if _endpoint is None:
        _endpoint = any(os.environ.get(name) for name in ENDPOINT_VARIABLES)
    return _endpoint


def _tracer() -> Any:
    """The tracer for a new run, or None when tracing is off (the common, free case)."""
    if _injected is not None:
        return _injected.get_tracer(_SCOPE)
    api = sys.modules.get("opentelemetry.trace")
    if api is None:
        if not _endpoint_set():
            return None  # off: opentelemetry is not imported, and is not imported here
        api = _import_api()
        if api is None:
            return None
    provider = api.get_tracer_provider()
    if isinstance(provider, api.ProxyTracerProvider | api.NoOpTracerProvider):
        return None  # nobody set a provider up: spans would record nothing
    return provider.get_tracer(_SCOPE)


def _import_api() -> Any:
    global _missing_warned
    try:
        from opentelemetry import trace
    except ImportError:
        if not _missing_warned:
            _missing_warned = True
            log.warning("OTEL_EXPORTER_OTLP_ENDPOINT is set but OpenTelemetry is not installed:"
                        " runs are not traced; install it with pip install 'promptui[otel]'")
        return None
    return trace


def use_tracer_provider(provider: Any) -> Any:
    """Trace runs with ``provider`` (an OpenTelemetry TracerProvider; None: back to the global
    one), without touching the process-wide provider. Returns the provider it replaced, so a
    test can put it back."""
    global _injected
    previous, _injected = _injected, provider
    return previous


def configure_from_env() -> Callable[[], None] | None:
    """Set up the global TracerProvider a host exports with, when ``OTEL_EXPORTER_OTLP_ENDPOINT``
    is set: the SDK's provider with a BatchSpanProcessor over the OTLP/HTTP exporter (which reads
    the standard ``OTEL_EXPORTER_OTLP_*`` variables), ``service.name`` = promptui unless
    ``OTEL_SERVICE_NAME`` says otherwise. Returns the function that flushes and shuts it down
    (also run at exit by the SDK), or None when tracing is off or OpenTelemetry is missing."""
    if not _endpoint_set() or _import_api() is None:
        return None
    try:
        from opentelemetry import trace
        from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
        from opentelemetry.sdk.resources import Resource
        from opentelemetry.sdk.trace import TracerProvider
        from opentelemetry.sdk.trace.export import BatchSpanProcessor
    except ImportError as exc:
        log.warning("OTEL_EXPORTER_OTLP_ENDPOINT is set but the OpenTelemetry SDK or its OTLP "
                    "exporter is missing (%s): runs are not traced; install it with "
                    "pip install 'promptui[otel]'", exc)
        return None
    current = trace.get_tracer_provider()
    if not isinstance(current, trace.ProxyTracerProvider):
        return None  # the embedding program set its own up: use that one
    service = os.environ.get("OTEL_SERVICE_NAME") or SERVICE_NAME
    provider = TracerProvider(resource=Resource.create({"service.name": service}))
    provider.add_span_processor(BatchSpanProcessor(OTLPSpanExporter()))
    trace.set_tracer_provider(provider)
    return provider.shutdown


def _hex_trace_id(span: Any) -> str:
    context = span.get_span_context()
    return f"{context.trace_id:032x}" if context.is_valid else ""


def _hex_span_id(span: Any) -> str:
    context = span.get_span_context()
    return f"{context.span_id:016x}" if context.is_valid else ""


def _set_error(span: Any, description: str) -> None:
    from opentelemetry.trace import Status, StatusCode
    span.set_status(Status(StatusCode.ERROR, description[:500]))


class RunSpan:
    """The span of one run (a no-op when ``span`` is None): ``trace_id`` and ``span_id`` are
    what the journal keeps on the run (a run resumed after a restart goes on in the same
    trace, under this span); :meth:`outcome` and :meth:`end` close it."""

    __slots__ = ("_ended", "span", "span_id", "trace_id")

    def __init__(self, span: Any = None) -> None:
        self.span = span
        self.trace_id = _hex_trace_id(span) if span is not None else ""
        self.span_id = _hex_span_id(span) if span is not None else ""
        self._ended = False

    def set(self, key: str, value: str | int | float | bool) -> None:
        """One attribute on the run's span (the run id, once it is known)."""
        if self.span is not None:
            self.span.set_attribute(key, value)

    def outcome(self, state: str, reason: str = "", error: str = "") -> None:
        """The run's end state (``promptui.run.outcome``); error status when it failed.
        ``error`` must already be redacted."""
        if self.span is None:
            return
        self.span.set_attribute("promptui.run.outcome", state)
        if reason:
            self.span.set_attribute("promptui.run.reason", reason)
        if state == "failed":
            _set_error(self.span, f"{reason}: {error}" if reason else error)

    def journal_commit(self, durable: Any) -> None:
        """A ``journal.commit run_finished`` span from now to when ``durable`` (the future of
        the run's end entry) resolves: the run's steps are durable with it."""
        if self.span is None or durable is None:
            return
        from opentelemetry import trace
        tracer = _run_tracer.get()
        if tracer is None:
            return
        child = tracer.start_span("journal.commit run_finished",
                                  context=trace.set_span_in_context(self.span))

        def done(future: Any) -> None:
            if future.cancelled():
                _set_error(child, "cancelled")
            elif future.exception() is not None:
                _set_error(child, str(future.exception()))
            child.end()
        durable.add_done_callback(done)

    def end(self) -> None:
        """End the run's span (once; later calls do nothing)."""
        if self.span is not None and not self._ended:
            self._ended = True
            self.span.end()


_OFF = RunSpan()


class _Off:
    """A reusable context manager that yields a no-op span: what tracing off costs."""

    __slots__ = ("value",)

    def __init__(self, value: Any) -> None:
        self.value = value

    def __enter__(self) -> Any:
        return self.value

    def __exit__(self, *exc: object) -> None:
        return None


_RUN_OFF = _Off(_OFF)


def run_span(process: str, event_id: str, trigger_type: str, attempt: int, *,
             resumes: tuple[str, str] | None = None) -> AbstractContextManager[RunSpan]:
    """The span of a run of ``process`` for one event, current for the model and tool calls
    made inside it. Ended on exit; an exception leaving it (cancellation) is recorded.
    ``resumes``: (trace id, span id) of the run's first span, as journaled, when a recovered
    run goes on: its span is a child of that one, in the same trace."""
    tracer = _tracer()
    if tracer is None:
        return _RUN_OFF
    return _traced_run(tracer, process, event_id, trigger_type, attempt, resumes)


def _parent(resumes: tuple[str, str] | None) -> Any:
    """The context a run's span starts in: empty (a root: every run is a trace of its own,
    the worker that runs it is no caller's child), or the journaled span it resumes."""
    from opentelemetry import context, trace
    if resumes is None:
        return context.Context()
    try:
        trace_id, span_id = int(resumes[0], 16), int(resumes[1], 16)
    except ValueError:
        return context.Context()
    parent = trace.SpanContext(trace_id=trace_id, span_id=span_id, is_remote=True,
                               trace_flags=trace.TraceFlags(trace.TraceFlags.SAMPLED))
    if not parent.is_valid:
        return context.Context()
    return trace.set_span_in_context(trace.NonRecordingSpan(parent), context.Context())


@contextmanager
def _traced_run(tracer: Any, process: str, event_id: str, trigger_type: str, attempt: int,
                resumes: tuple[str, str] | None) -> Iterator[RunSpan]:
    from opentelemetry import trace
    attributes: dict[str, Any] = {
        "promptui.process": process, "promptui.trigger.type": trigger_type,
        "promptui.event.id": event_id, "promptui.run.attempt": attempt}
    if resumes is not None:
        attributes["promptui.run.resumed"] = True
    span = tracer.start_span(f"run {process}", context=_parent(resumes), attributes=attributes)
    traced = RunSpan(span)
    token = _run_tracer.set(tracer)
    try:
        with trace.use_span(span, end_on_exit=False, record_exception=False,
                            set_status_on_exception=False):
            yield traced
    except BaseException as exc:
        span.set_attribute("promptui.run.outcome", "cancelled")
        span.set_attribute("promptui.run.exception", type(exc).__name__)
        raise
    finally:
        _run_tracer.reset(token)
        traced.end()


class CallSpan:
    """A model or tool call's span (a no-op when ``span`` is None)."""

    __slots__ = ("span",)

    def __init__(self, span: Any = None) -> None:
        self.span = span

    def set(self, key: str, value: str | int | float | bool) -> None:
        """One attribute on the call's span."""
        if self.span is not None:
            self.span.set_attribute(key, value)

    def usage(self, input_tokens: int, output_tokens: int) -> None:
        """A model turn's token counts (``gen_ai.usage.*``)."""
        if self.span is not None:
            self.span.set_attribute("gen_ai.usage.input_tokens", input_tokens)
            self.span.set_attribute("gen_ai.usage.output_tokens", output_tokens)

    def failed(self, description: str) -> None:
        """Error status (the description must already be redacted)."""
        if self.span is not None:
            _set_error(self.span, description)


_NO_CALL = CallSpan()
_CALL_OFF = _Off(_NO_CALL)


@contextmanager
def _call_span(name: str, attributes: dict[str, Any]) -> Iterator[CallSpan]:
    tracer = _run_tracer.get()
    if tracer is None:
        yield _NO_CALL
        return
    with tracer.start_as_current_span(name, attributes=attributes, record_exception=False,
                                      set_status_on_exception=False) as span:
        call = CallSpan(span)
        try:
            yield call
        except BaseException as exc:  # the type and a reason, never a message: no secrets
            reason = getattr(exc, "reason", None)
            call.failed(f"{type(exc).__name__}: {reason}" if reason else type(exc).__name__)
            raise


def model_call_span(model_name: str) -> AbstractContextManager[CallSpan]:
    """``chat {model}``: one model call of the current run (GenAI semantic conventions).
    ``model_name`` is the model's ``provider:model`` name (``scripted`` for a script)."""
    if _run_tracer.get() is None:
        return _CALL_OFF
    provider, _, model = model_name.partition(":")
    model = model or model_name
    return _call_span(f"chat {model}", {
        "gen_ai.operation.name": "chat", "gen_ai.system": provider,
        "gen_ai.provider.name": provider, "gen_ai.request.model": model})


def tool_call_span(tool: str, call_id: str, step: int) -> AbstractContextManager[CallSpan]:
    """``execute_tool {tool}``: one tool call of the current run; its effect, idempotency key
    and outcome are set on it as they are known."""
    if _run_tracer.get() is None:
        return _CALL_OFF
    return _call_span(f"execute_tool {tool}", {
        "gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": tool,
        "gen_ai.tool.call.id": call_id, "promptui.step": step})
