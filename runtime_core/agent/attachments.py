"""Binary content a tool returned (an image, audio, a blob), kept beside the text the model reads.

The tool's text carries a placeholder with the type, MIME type and size, so a model that cannot
take the content still knows it is there; an adapter that accepts images sends the bytes (see
``to_openai_messages``). A tool message may carry ``"attachments"``: a list of
:meth:`Attachment.to_message` dicts that other adapters simply ignore. The journal keeps the bytes
of small content only: above ``JOURNAL_INLINE_LIMIT`` it stores the digest and the size.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

JOURNAL_INLINE_LIMIT = 64 * 1024  # bytes of content the journal keeps whole
ATTACHMENTS_KEY = "attachments"  # in a tool message of ModelRequest.messages
# The image types both OpenAI's and Anthropic's APIs take; others stay placeholders.
IMAGE_TYPES = frozenset({"image/png", "image/jpeg", "image/gif", "image/webp"})


def human_size(size: int) -> str:
    if size < 1024:
        return f"{size} B"
    if size < 1024 * 1024:
        return f"{size / 1024:.1f} kB"
    return f"{size / (1024 * 1024):.1f} MB"


@dataclass(frozen=True, slots=True)
class Attachment:
    kind: str  # "image", "audio" or "blob"
    mime_type: str
    data: str  # base64, as the server sent it
    size: int  # decoded bytes
    sha256: str
    source: str = ""  # the resource's URI, when it came from one

    @classmethod
    def from_base64(cls, kind: str, mime_type: str | None, data: str, source: str = ""
                    ) -> Attachment:
        """Raises ValueError when ``data`` is not base64."""
        try:
            raw = base64.b64decode(data, validate=True)
        except (binascii.Error, ValueError):
            raise ValueError(f"the {kind} content is not valid base64") from None
        return cls(kind, mime_type or "application/octet-stream", data, len(raw),
                   hashlib.sha256(raw).hexdigest(), source)

    def placeholder(self) -> str:
        where = f" from {self.source}" if self.source else ""
        return (f"[{self.kind}{where}: {self.mime_type}, {human_size(self.size)}, "
                f"sha256 {self.sha256[:16]}]")

    def to_message(self) -> dict[str, Any]:
        """The form a model adapter reads: the bytes included."""
        return {"type": self.kind, "mime_type": self.mime_type, "data": self.data,
                "size": self.size, "sha256": self.sha256,
                **({"source": self.source} if self.source else {})}

    def to_journal(self) -> dict[str, Any]:
        """The form the journal keeps: the bytes only when they are small."""
        form = self.to_message()
        if self.size > JOURNAL_INLINE_LIMIT:
            del form["data"]
        return form


def from_message(data: Mapping[str, Any]) -> Attachment | None:
    """An attachment back from its message (or journal) form; None when the bytes are not in it
    (the journal kept only the digest) or it is malformed."""
    content = data.get("data")
    if not isinstance(content, str) or not isinstance(data.get("sha256"), str):
        return None
    return Attachment(str(data.get("type") or "blob"), str(data.get("mime_type") or ""),
                      content, int(data.get("size") or 0), str(data["sha256"]),
                      str(data.get("source") or ""))


def message_attachments(message: Mapping[str, Any]) -> list[Attachment]:
    """The attachments a message carries (with their bytes)."""
    found = message.get(ATTACHMENTS_KEY)
    if not isinstance(found, list):
        return []
    out = [from_message(item) for item in found if isinstance(item, Mapping)]
    return [a for a in out if a is not None]


def without_bytes(message: Mapping[str, Any]) -> dict[str, Any]:
    """A message fit for the journal's record of a prompt: attachments by digest and size."""
    out = dict(message)
    found = out.get(ATTACHMENTS_KEY)
    if isinstance(found, list):
        out[ATTACHMENTS_KEY] = [{k: v for k, v in item.items() if k != "data"}
                                for item in found if isinstance(item, Mapping)]
    return out


__all__ = ["ATTACHMENTS_KEY", "IMAGE_TYPES", "JOURNAL_INLINE_LIMIT", "Attachment", "from_message",
           "human_size", "message_attachments", "without_bytes"]
