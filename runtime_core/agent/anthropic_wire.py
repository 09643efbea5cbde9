"""The Anthropic Messages API's wire format, without the SDK: our conversation -> the request's
``system`` and ``messages``, a response -> a ModelTurn, an error body -> readable text.

The API is stricter than chat completions, so the conversion repairs what a bounded history can
break: roles must alternate (same-role neighbours are merged), every ``tool_use`` needs its
``tool_result`` in the very next user message (first in its content), a result without its call
is kept as text, and text blocks may not be empty."""

from __future__ import annotations

import json
import re
from typing import Any

import httpx

from runtime_core.agent.attachments import IMAGE_TYPES, message_attachments
from runtime_core.agent.model import ModelError, ModelTurn, ToolCall, ToolSpec, Usage

Block = dict[str, Any]
NO_RESULT = "error: no result was recorded for this call"
TRIMMED = "(the earlier conversation was trimmed)"
_ID_CHARS = re.compile(r"[^A-Za-z0-9_-]")
IMAGE_LIMIT = 5 * 1024 * 1024  # bytes: the API's limit for one image


def _tool_id(raw: Any, index: int) -> str:
    """The API takes ids of letters, digits, _ and - only (another model's ids may not be)."""
    text = _ID_CHARS.sub("_", str(raw or ""))
    return text or f"call_{index}"


def _text(text: str) -> list[Block]:
    return [{"type": "text", "text": text}] if text.strip() else []


class _Builder:
    """Appends blocks by role, merging a role's consecutive messages."""

    def __init__(self) -> None:
        self.messages: list[dict[str, Any]] = []
        self.pending: list[str] = []  # tool_use ids of the last assistant turn not answered yet

    def add(self, role: str, blocks: list[Block]) -> None:
        if role == "assistant" or (blocks and blocks[0]["type"] != "tool_result"):
            self.answer_pending()
        if not blocks:
            return
        if self.messages and self.messages[-1]["role"] == role:
            self.messages[-1]["content"].extend(blocks)
        else:
            self.messages.append({"role": role, "content": blocks})

    def answer_pending(self) -> None:
        """A call whose result the history lost still gets one, or the API refuses the turn."""
        missing, self.pending = self.pending, []
        if missing:
            self.add("user", [{"type": "tool_result", "tool_use_id": i, "content": NO_RESULT,
                               "is_error": True} for i in missing])

    def finish(self) -> list[dict[str, Any]]:
        self.answer_pending()
        for message in self.messages:  # tool results first in a user turn, text after them
            if message["role"] == "user":
                message["content"].sort(key=lambda b: b["type"] != "tool_result")
        if self.messages and self.messages[0]["role"] != "user":
            self.messages.insert(0, {"role": "user", "content": _text(TRIMMED)})
        return self.messages


def to_anthropic(messages: list[dict[str, Any]], *, images: bool = True
                 ) -> tuple[str, list[dict[str, Any]]]:
    """Our conversation -> (system prompt, Messages API messages). The leading system messages
    (instructions, context state, budget and mission lines) become ``system``; a system message
    later in the history (a rewind's note) stays where it is, as user text."""
    system: list[str] = []
    build = _Builder()
    for message in messages:
        role = message.get("role")
        content = message.get("content")
        text = "" if content is None else str(content)
        if role == "system" and not build.messages and not build.pending:
            if text.strip():
                system.append(text)
        elif role == "assistant":
            calls = message.get("tool_calls") or []
            ids = [_tool_id(c.get("id"), i) for i, c in enumerate(calls)]
            build.add("assistant", _text(text) + [
                {"type": "tool_use", "id": call_id, "name": str(c.get("name") or ""),
                 "input": dict(c.get("args") or {})}
                for call_id, c in zip(ids, calls, strict=True)])
            build.pending = ids
        elif role == "tool":
            build.add("user", [_tool_result(build, message, text, images)])
        else:  # user, and a system note inside the history
            build.add("user", _text(text))
    return "\n\n".join(system), build.finish()


def _tool_result(build: _Builder, message: dict[str, Any], text: str, images: bool
                 ) -> Block:
    raw = message.get("tool_call_id")
    call_id = _tool_id(raw, 0) if raw else (build.pending[0] if build.pending else "")
    if call_id not in build.pending:  # its call was trimmed away: keep what it said as text
        return {"type": "text", "text": f"[result of an earlier tool call] {text}"}
    build.pending.remove(call_id)
    block: Block = {"type": "tool_result", "tool_use_id": call_id, "content": text}
    shown = [{"type": "image", "source": {"type": "base64", "media_type": a.mime_type,
                                          "data": a.data}}
             for a in (message_attachments(message) if images else [])
             if a.kind == "image" and a.mime_type in IMAGE_TYPES and a.size <= IMAGE_LIMIT]
    if shown:  # a tool result may hold images beside its text
        block["content"] = [*_text(text), *shown]
    # A failed call reads "error: ..." (runs/tool_step); the API has a flag for that.
    if message.get("is_error") or text.startswith("error: "):
        block["is_error"] = True
    return block


def to_tools(tools: list[ToolSpec]) -> list[dict[str, Any]]:
    return [{"name": t.name, "description": t.description, "input_schema": t.parameters}
            for t in tools]


def parse_message(data: Any, max_tokens: int) -> tuple[ModelTurn, str]:
    """A Messages API response -> (the turn, its stop_reason)."""
    content = data.get("content") if isinstance(data, dict) else None
    if not isinstance(content, list):
        raise ModelError("the answer has no content list; is the base URL an Anthropic "
                         "Messages API (POST /v1/messages)?")
    stop = str(data.get("stop_reason") or "")
    texts: list[str] = []
    calls: list[ToolCall] = []
    for block in content:
        kind = block.get("type") if isinstance(block, dict) else None
        if kind == "text":
            texts.append(str(block.get("text") or ""))
        elif kind == "tool_use":
            name, args = str(block.get("name") or ""), block.get("input")
            if stop == "max_tokens":
                raise ModelError(f"the model ran out of max_tokens ({max_tokens}) while "
                                 f"writing a call to tool {name!r}; raise max_tokens in the "
                                 "model mapping")
            if not isinstance(args, dict):
                raise ModelError(f"the model sent non-object input for tool {name!r}: "
                                 f"{json.dumps(args, default=str)[:200]}")
            calls.append(ToolCall(name, args, str(block.get("id") or f"call_{len(calls)}")))
        # thinking and other block kinds are not part of the turn
    usage = data.get("usage") or {}
    # input_tokens leaves out the prompt read from or written to the cache; the prompt is all.
    prompt = sum(int(usage.get(k) or 0) for k in (
        "input_tokens", "cache_creation_input_tokens", "cache_read_input_tokens"))
    turn_usage = Usage(prompt, int(usage.get("output_tokens") or 0))
    reply = "".join(texts)
    if calls:
        return ModelTurn(reply=reply or None, tool_calls=tuple(calls), usage=turn_usage), stop
    return ModelTurn(reply=reply, usage=turn_usage), stop


def error_of(response: httpx.Response) -> tuple[str, str]:
    """(error type, message) of an error answer: ``{"type": "error", "error": {...}}``."""
    try:
        error = response.json().get("error")
    except (ValueError, AttributeError):
        return "", response.text[:300]
    if isinstance(error, dict):
        return str(error.get("type") or ""), str(error.get("message") or error)[:300]
    return "", str(error or response.text)[:300]
