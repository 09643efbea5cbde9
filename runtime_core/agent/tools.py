"""Plain Python callables as tools: a JSON schema from the signature, validated arguments, and an
effect (read or write) that recovery relies on. An undeclared effect is treated as a write."""

from __future__ import annotations

import asyncio
import importlib
import inspect
import typing
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol

from pydantic import BaseModel, ConfigDict, ValidationError, create_model

from runtime_core.agent.attachments import Attachment
from runtime_core.agent.model import ToolSpec
from runtime_core.strict import StrictModel
from runtime_core.triggers.base import TriggerEvent

Effect = Literal["read", "write"]


class ToolError(Exception):
    """A tool could not be declared or loaded (bad path, bad signature)."""


class OutcomeUnknown(Exception):
    """The call was made but its answer never came (the connection was lost, the server died,
    the call timed out): it may or may not have taken effect. A write that raises this parks
    its run for an operator; a read is reported to the model as interrupted."""


@dataclass(slots=True)
class ToolContext:
    """Handed to a tool that asks for it (a parameter annotated ``ToolContext``).

    ``idempotency_key`` is ``run_id:step``: a tool with outside effects can use it to make a repeat
    harmless. Context writes made with :meth:`set` are applied when the tool returns successfully.
    """

    process: str
    run_id: str
    step: int
    event: TriggerEvent
    state: dict[str, Any]
    updates: dict[str, Any] = field(default_factory=dict)
    outbox: list[tuple[str, str, Any]] = field(default_factory=list)
    secrets: Callable[[str], str] | None = None
    secrets_used: list[str] = field(default_factory=list)
    artifacts: list[tuple[str, Any, tuple[str, ...]]] = field(default_factory=list)
    attachments: list[Attachment] = field(default_factory=list)
    #: Told of the call's progress (progress, total or None, message or None); set by the run.
    on_progress: Callable[[float, float | None, str | None], None] | None = None
    #: On a scale-out node: the epoch of the lease under which this process runs here, a
    #: fencing token that grows with every change of owner. Pass it to a system that accepts
    #: one (it refuses a write carrying a smaller token than one it has seen), so a write from
    #: an owner that lost the process cannot land after the new owner's. None outside a
    #: cluster.
    fencing_token: int | None = None

    @property
    def idempotency_key(self) -> str:
        return f"{self.run_id}:{self.step}"

    def get(self, key: str, default: Any = None) -> Any:
        if key in self.updates:
            return self.updates[key]
        return self.state.get(key, default)

    def set(self, key: str, value: Any) -> None:
        self.updates[key] = value

    def secret(self, name: str) -> str:
        """A scoped secret's value (KeyError if unknown or expired). Never put it in a reply:
        anything the runtime writes has it replaced by ``[secret:name]``."""
        if self.secrets is None:
            raise KeyError(f"no secrets are configured for this process (asked for {name!r})")
        value = self.secrets(name)
        self.secrets_used.append(name)  # journaled (by name) once the tool is back on the loop
        return value

    def artifact(self, kind: str, data: Any = None, links: tuple[str, ...] | list[str] = ()
                 ) -> None:
        """Declare completion evidence (e.g. ``"solution"``, or a ``"verification"`` linked to
        an action's id, the idempotency key of the write it checks). Journaled with the tool's
        result, in the same entry, once the tool returns successfully."""
        self.artifacts.append((kind, data, tuple(links)))

    def attach(self, attachment: Attachment) -> None:
        """Binary content for the model (an image...): its placeholder belongs in the result
        text; the journal keeps the bytes only when they are small."""
        self.attachments.append(attachment)

    def progress(self, progress: float, total: float | None = None,
                 message: str | None = None) -> None:
        """Show how far the call is, on the running step in the control room."""
        if self.on_progress is not None:
            self.on_progress(progress, total, message)

    def emit(self, event_type: str, data: Any = None) -> None:
        """Emit on the runtime's event bus (``event`` triggers), once the tool has returned."""
        self.outbox.append(("event", event_type, data))

    def publish(self, topic: str, content: Any = None) -> None:
        """Publish on the runtime's message broker (``message`` triggers), once it returned."""
        self.outbox.append(("message", topic, content))


class AgentTool(Protocol):
    """What the run loop needs of a tool: Python callables and MCP tools both provide it."""

    name: str
    description: str
    effect: Effect

    @property
    def journal_info(self) -> dict[str, Any]:
        """Extra facts recorded with the tool's intent (where it comes from, idempotency)."""
        ...

    def spec(self) -> ToolSpec: ...

    def validate_args(self, args: dict[str, Any]) -> dict[str, Any]: ...

    async def invoke(self, args: dict[str, Any], ctx: ToolContext) -> Any: ...


class _ArgsBase(StrictModel):
    model_config = ConfigDict(arbitrary_types_allowed=True)


@dataclass(slots=True)
class Tool:
    """A Python function the model can call, made with ``tool(fn, effect=...)``: its name,
    description (the docstring) and argument model (from the signature), and its ``effect``:
    ``read`` is safe to repeat, ``write`` changes the world and is journaled before it runs
    with an idempotency key (``run_id:step``). A parameter typed ToolContext receives the
    run's context instead of a model argument."""

    name: str
    description: str
    effect: Effect
    fn: Callable[..., Any]
    args_model: type[BaseModel]
    context_param: str | None
    is_async: bool

    @property
    def parameters(self) -> dict[str, Any]:
        schema = self.args_model.model_json_schema()
        schema.pop("title", None)
        return schema

    @property
    def journal_info(self) -> dict[str, Any]:
        return {}

    def spec(self) -> ToolSpec:
        return ToolSpec(self.name, self.description, self.parameters)

    def validate_args(self, args: dict[str, Any]) -> dict[str, Any]:
        """Return the arguments checked against the signature, or raise ``ValueError``."""
        try:
            model = self.args_model.model_validate(args)
        except ValidationError as exc:
            problems = "; ".join(
                f"{'.'.join(str(p) for p in err['loc']) or '(arguments)'}: {err['msg']}"
                for err in exc.errors()
            )
            raise ValueError(f"invalid arguments for tool {self.name!r}: {problems}") from None
        return {name: getattr(model, name) for name in type(model).model_fields}

    async def invoke(self, args: dict[str, Any], ctx: ToolContext) -> Any:
        kwargs = dict(args)
        if self.context_param is not None:
            kwargs[self.context_param] = ctx
        if self.is_async:
            return await self.fn(**kwargs)
        # Sync tools run in a thread so a slow one never freezes the other processes.
        return await asyncio.to_thread(self.fn, **kwargs)


def _args_model(fn: Callable[..., Any], name: str) -> tuple[type[BaseModel], str | None]:
    try:
        hints = typing.get_type_hints(fn)
    except Exception:
        hints = {}
    signature = inspect.signature(fn)
    fields: dict[str, Any] = {}
    context_param: str | None = None
    for param in signature.parameters.values():
        raw = param.annotation
        annotation = hints.get(param.name, Any)
        # A tool defined in a local scope may keep its annotations as unresolved strings.
        if annotation is ToolContext or (
            isinstance(raw, str) and raw.rsplit(".", 1)[-1] == "ToolContext"
        ):
            context_param = param.name
            continue
        if isinstance(annotation, str):
            annotation = Any
        if param.kind is param.VAR_KEYWORD:
            continue  # optional extras: the model is shown only the named parameters
        if param.kind is param.VAR_POSITIONAL:
            raise ToolError(f"tool {name!r}: *args cannot be described to a model")
        default = ... if param.default is inspect.Parameter.empty else param.default
        fields[param.name] = (annotation, default)
    model = create_model(f"{name}_args", __base__=_ArgsBase, **fields)
    return model, context_param


def tool(
    fn: Callable[..., Any] | Tool,
    *,
    name: str | None = None,
    description: str | None = None,
    effect: Effect = "write",
) -> Tool:
    """Wrap a sync or async callable as a tool.

    ``effect="read"`` declares it free of outside effects: after a crash an unfinished read is
    simply recorded as interrupted. Anything else is a write, which must be reconciled.
    """
    if effect not in ("read", "write"):
        raise ToolError(f"tool effect must be 'read' or 'write', not {effect!r}")
    if isinstance(fn, Tool):
        return fn
    tool_name = name or getattr(fn, "__name__", None)
    if not tool_name or not callable(fn):
        raise ToolError(f"{fn!r} is not a named callable; pass name=")
    doc = description if description is not None else inspect.getdoc(fn) or ""
    args_model, context_param = _args_model(fn, tool_name)
    return Tool(
        name=tool_name,
        description=doc.strip().split("\n\n")[0],
        effect=effect,
        fn=fn,
        args_model=args_model,
        context_param=context_param,
        is_async=inspect.iscoroutinefunction(fn),
    )


def load_tool(
    path: str, *, name: str | None = None, description: str | None = None, effect: Effect = "write"
) -> Tool:
    """Import ``package.module:function`` (or a ready :class:`Tool` at that path)."""
    module_name, _, attr = path.partition(":")
    try:
        module = importlib.import_module(module_name)
    except ImportError as exc:
        raise ToolError(f"tool {path!r}: cannot import module {module_name!r}: {exc}") from exc
    except SystemExit as exc:  # a script's sys.exit() must not end the runtime
        raise ToolError(f"tool {path!r}: importing module {module_name!r} called "
                        f"sys.exit({exc.code!r})") from None
    except Exception as exc:
        raise ToolError(f"tool {path!r}: importing module {module_name!r} raised "
                        f"{type(exc).__name__}: {exc}") from exc
    target: Any = module
    for part in attr.split("."):
        if not hasattr(target, part):
            raise ToolError(f"tool {path!r}: module {module_name!r} has no attribute {attr!r}")
        target = getattr(target, part)
    if isinstance(target, Tool):
        return target
    return tool(target, name=name, description=description, effect=effect)
