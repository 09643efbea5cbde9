"""Offline, deterministic models: ``scripted`` plays turns from data, ``echo`` summarises the event.

A scripted model is stateless across runs: the turn it plays is chosen by the request's turn index
within the run, so every run starts again at the script's first turn.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from runtime_core.agent.model import ModelError, ModelRequest, ModelTurn, ToolCall, Usage
from runtime_core.agent.script import ScriptedModelSpec, ScriptTurn
from runtime_core.triggers.base import TriggerEvent

DEFAULT_SCRIPT = "default"


class _CompiledScript:
    """A script with sleep-only turns folded into the next turn and repeats indexed."""

    def __init__(self, name: str, turns: list[ScriptTurn]) -> None:
        self.name = name
        # (first turn index, how many times or None for forever, the turn, delay before it)
        self._spans: list[tuple[int, int | None, ScriptTurn, float]] = []
        index = 0
        pending_sleep = 0.0
        for turn in turns:
            if turn.reply is None and turn.tool_calls is None and turn.raise_ is None:
                pending_sleep += turn.sleep or 0.0
                continue
            delay = pending_sleep + (turn.sleep or 0.0)
            pending_sleep = 0.0
            count = None if turn.repeat == "forever" else int(turn.repeat)
            self._spans.append((index, count, turn, delay))
            if count is None:
                break  # nothing after a "forever" turn can ever play
            index += count
        self.length: int | None = None if self._spans and self._spans[-1][1] is None else index

    def turn_at(self, index: int) -> tuple[ScriptTurn, float]:
        for start, count, turn, delay in self._spans:
            if count is None or index < start + count:
                return turn, delay
        raise ModelError(
            f"script {self.name!r} has {self.length} turn(s) and the run asked for turn "
            f"{index + 1}; end the script with a reply"
        )


def _lookup(payload: Any, dotted: str) -> Any:
    value = payload
    for part in dotted.split("."):
        if isinstance(value, dict):
            value = value.get(part)
        elif isinstance(value, list) and part.isdigit() and int(part) < len(value):
            value = value[int(part)]
        else:
            return None
    return value


def _substitute(value: Any, request: ModelRequest) -> Any:
    """Expand ``$payload.a.b``, ``$event_id`` and ``$run_id`` strings in tool arguments."""
    if isinstance(value, str) and value.startswith("$"):
        if value.startswith("$payload."):
            return _lookup(request.event.payload, value[len("$payload."):])
        if value == "$payload":
            return request.event.payload
        if value == "$event_id":
            return request.event.event_id
        if value == "$run_id":
            return request.run_id
        return value
    if isinstance(value, dict):
        return {k: _substitute(v, request) for k, v in value.items()}
    if isinstance(value, list):
        return [_substitute(v, request) for v in value]
    return value


def _turn_results(messages: list[dict[str, Any]], turns: int) -> list[str]:
    """The tool results of each of the run's ``turns`` earlier model calls, oldest first:
    each one that called tools left an assistant message, then the tools' answers."""
    # From the end: only the last ``turns`` groups count, and the conversation before this
    # run (kept across runs) can be long.
    groups: list[list[str]] = []
    answers: list[str] = []
    for message in reversed(messages):
        if len(groups) >= turns:
            break
        role = message.get("role")
        if role == "tool":
            answers.append(str(message.get("content") or ""))
        elif role == "assistant" and message.get("tool_calls"):
            groups.append(answers[::-1])
            answers = []
    texts = ["\n".join(group) for group in reversed(groups)]
    return [""] * (turns - len(texts)) + texts


class ScriptedModel:
    """Plays the turns of a :class:`ScriptedModelSpec`."""

    def __init__(self, spec: ScriptedModelSpec, *, name: str = "scripted") -> None:
        self.name = name
        self.spec = spec
        self._scripts = {key: _CompiledScript(key, turns) for key, turns in spec.scripts.items()}
        if spec.turns:
            self._scripts.setdefault(DEFAULT_SCRIPT, _CompiledScript(DEFAULT_SCRIPT, spec.turns))
        # No turn branches on a result: the script is chosen by the event alone (no need to
        # read the run's tool results back from the messages each turn).
        self._branches = any(turn.on_result for turns in (spec.turns, *spec.scripts.values())
                             for turn in turns)

    @classmethod
    def from_file(cls, path: str | Path) -> ScriptedModel:
        spec = load_script_file(path)
        return cls(spec, name=f"scripted:{path}")

    def choose_script(self, event: TriggerEvent) -> _CompiledScript:
        select = self.spec.select
        if select.by_payload_field:
            wanted = _lookup(event.payload, select.by_payload_field)
            if isinstance(wanted, str) and wanted in self._scripts:
                return self._scripts[wanted]
        mapped = select.by_trigger_type.get(event.trigger_type)
        if mapped is not None:
            return self._scripts[mapped]
        if event.trigger_type in self._scripts:
            return self._scripts[event.trigger_type]
        if DEFAULT_SCRIPT in self._scripts:
            return self._scripts[DEFAULT_SCRIPT]
        raise ModelError(
            f"no script for trigger type {event.trigger_type!r} and no default 'turns'; "
            f"scripts: {', '.join(sorted(self._scripts))}"
        )

    def _place(self, request: ModelRequest) -> tuple[_CompiledScript, int]:
        """The script and the index in it of the turn to play: the run's script, or the one
        an ``on_result`` branch of an earlier turn switched to (found again from the
        messages each time: the model keeps no state)."""
        script, start = self.choose_script(request.event), 0
        if not self._branches:
            return script, request.turn
        results = _turn_results(request.messages, request.turn)
        for index in range(request.turn):
            turn, _ = script.turn_at(index - start)
            said = results[index].lower()
            branch = next((b for b in turn.on_result if b.contains.lower() in said), None)
            if branch is not None:
                script, start = self._scripts[branch.script], index + 1
        return script, request.turn - start

    async def complete(self, request: ModelRequest) -> ModelTurn:
        script, index = self._place(request)
        turn, delay = script.turn_at(index)
        if delay > 0:
            await asyncio.sleep(delay)
        if turn.raise_ is not None:
            raise ModelError(turn.raise_)
        if turn.tool_calls is not None:
            calls = tuple(
                ToolCall(call.name, _substitute(call.args, request), f"call-{request.turn}-{i}")
                for i, call in enumerate(turn.tool_calls)
            )
            out = sum(len(c.name) + len(json.dumps(c.args, default=str)) for c in calls)
            return ModelTurn(tool_calls=calls, usage=Usage(output_tokens=out // 4 + 1))
        reply = turn.reply or ""
        return ModelTurn(reply=reply, usage=Usage(output_tokens=len(reply) // 4 + 1))


class EchoModel:
    """The default offline model: one turn that says which event it handled."""

    name = "echo"

    async def complete(self, request: ModelRequest) -> ModelTurn:
        event = request.event
        payload = json.dumps(event.payload, default=str, ensure_ascii=False)
        if len(payload) > 120:
            payload = payload[:117] + "..."
        reply = f"Handled {event.trigger_type or 'event'} {event.event_id[:8]}: {payload}"
        return ModelTurn(reply=reply, usage=Usage(output_tokens=len(reply) // 4 + 1))


def load_script_file(path: str | Path) -> ScriptedModelSpec:
    """Read a YAML script; errors name the file and the dotted path of the bad field."""
    import yaml  # only a process with a script file pays for the YAML parser

    file = Path(path)
    try:
        raw = yaml.safe_load(file.read_text(encoding="utf-8"))
    except OSError as exc:
        raise ModelError(f"cannot read model script {file}: {exc.strerror or exc}") from exc
    except yaml.YAMLError as exc:
        raise ModelError(f"model script {file} is not valid YAML: {exc}") from exc
    if isinstance(raw, list):
        raw = {"turns": raw}
    if not isinstance(raw, dict):
        raise ModelError(f"model script {file} must be a mapping with 'turns' or 'scripts'")
    raw.setdefault("provider", "scripted")
    try:
        return ScriptedModelSpec.model_validate(raw)
    except ValidationError as exc:
        problems = "; ".join(
            f"{'.'.join(str(p) for p in err['loc'])}: {err['msg']}" for err in exc.errors()
        )
        raise ModelError(f"model script {file}: {problems}") from None
