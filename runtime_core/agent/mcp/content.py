"""What an MCP server returned, as the model reads it: text, plus binary content as attachments.

A tool result or a resource read holds text, images, audio, links to resources and embedded
resources. Text is passed on; binary content becomes an :class:`Attachment` (sent to a model that
accepts it) with a placeholder in the text; a resource link says how to read it, when the server
offers the read tool.
"""

from __future__ import annotations

import base64
import binascii
import json
from dataclasses import dataclass, field
from typing import Any

from runtime_core.agent.attachments import Attachment

TEXT_BLOB_LIMIT = 64 * 1024  # a text-typed blob up to this size is shown as text
TEXTUAL_TYPES = ("application/json", "application/xml", "application/yaml",
                 "application/javascript")


@dataclass(slots=True)
class McpOutput:
    text: str
    attachments: list[Attachment] = field(default_factory=list)


def _binary(kind: str, mime: str | None, data: str, source: str = "") -> tuple[str, Any]:
    """(placeholder, attachment or None) for base64 content."""
    try:
        made = Attachment.from_base64(kind, mime, data, source)
    except ValueError as exc:
        return f"[{kind}: {mime or '?'}, unreadable: {exc}]", None
    return made.placeholder(), made


def _is_textual(mime: str | None) -> bool:
    return bool(mime) and (str(mime).startswith("text/") or str(mime) in TEXTUAL_TYPES
                           or str(mime).endswith(("+json", "+xml")))


def _blob(mime: str | None, blob: str, uri: str, out: McpOutput) -> str:
    """A blob's text: decoded when it is small text, else a placeholder and an attachment."""
    if _is_textual(mime) and len(blob) <= TEXT_BLOB_LIMIT * 4 // 3 + 4:
        try:
            return base64.b64decode(blob, validate=True).decode("utf-8")
        except (binascii.Error, ValueError):
            pass  # not text after all: kept as binary
    kind = "image" if str(mime).startswith("image/") else \
        "audio" if str(mime).startswith("audio/") else "blob"
    text, made = _binary(kind, mime, blob, uri)
    if made is not None:
        out.attachments.append(made)
    return text


def _link(block: Any, read_tool: str | None) -> str:
    uri = str(getattr(block, "uri", ""))
    about = ", ".join(str(x) for x in (getattr(block, "name", None),
                                       getattr(block, "mime_type", None)) if x)
    text = f"[resource link: {uri}" + (f" ({about})" if about else "")
    if read_tool:
        text += f"; read it with the tool {read_tool} and uri={json.dumps(uri)}"
    return text + "]"


def content_output(blocks: list[Any], *, read_tool: str | None = None,
                   structured: Any = None) -> McpOutput:
    """A list of content blocks (a tool result's) as text and attachments."""
    out = McpOutput("")
    parts: list[str] = []
    for block in blocks:
        kind = getattr(block, "type", "")
        if kind == "text":
            parts.append(block.text)
        elif kind in ("image", "audio"):
            text, made = _binary(kind, getattr(block, "mime_type", None),
                                 str(getattr(block, "data", "")))
            parts.append(text)
            if made is not None:
                out.attachments.append(made)
        elif kind == "resource_link":
            parts.append(_link(block, read_tool))
        elif kind == "resource":
            resource = block.resource
            parts.append(_contents(resource, out, label=False))
    if not parts and structured is not None:
        parts.append(json.dumps(structured, ensure_ascii=False, default=str))
    out.text = "\n".join(parts)
    return out


def _contents(item: Any, out: McpOutput, *, label: bool) -> str:
    uri = str(getattr(item, "uri", ""))
    text = getattr(item, "text", None)
    if isinstance(text, str):
        return f"[{uri}]\n{text}" if label else text
    blob = getattr(item, "blob", None)
    if isinstance(blob, str):
        shown = _blob(getattr(item, "mime_type", None), blob, uri, out)
        return f"[{uri}]\n{shown}" if label and not shown.startswith("[") else shown
    return f"[resource: {uri}]"


def resource_output(result: Any) -> McpOutput:
    """A ``resources/read`` result: each content's text (labelled by its URI when there are
    several), binary ones as attachments."""
    out = McpOutput("")
    contents = list(getattr(result, "contents", []) or [])
    label = len(contents) > 1
    out.text = "\n\n".join(_contents(item, out, label=label) for item in contents) \
        or "(the resource is empty)"
    return out


def result_text(result: Any) -> str:
    """A tool result's text alone (binary content as placeholders)."""
    return content_output(list(result.content), structured=result.structured_content).text


__all__ = ["McpOutput", "content_output", "resource_output", "result_text"]
