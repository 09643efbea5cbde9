"""The parts of the protocol extras that need no server: content conversion, attachments and
their journal form, image parts for both model wire formats, the log gate, progress throttling
and a resumed run getting its small images back."""

from __future__ import annotations

import asyncio
import base64
import hashlib
from typing import Any

from mcp.types import (
    BlobResourceContents,
    CallToolResult,
    EmbeddedResource,
    ImageContent,
    ReadResourceResult,
    ResourceLink,
    TextContent,
    TextResourceContents,
)

from runtime_core.agent.anthropic_wire import to_anthropic
from runtime_core.agent.attachments import (
    JOURNAL_INLINE_LIMIT,
    Attachment,
    message_attachments,
    without_bytes,
)
from runtime_core.agent.mcp.content import content_output, resource_output, result_text
from runtime_core.agent.mcp.notices import LogGate
from runtime_core.agent.openai_compat import to_openai_messages
from runtime_core.events import ToolProgress
from runtime_core.journal.entry import EntryType, JournalEntry
from runtime_core.journal.replay import rebuild_run
from runtime_core.runs.progress import ProgressReporter
from tests.helpers.polling import wait_for


def b64(raw: bytes) -> str:
    return base64.b64encode(raw).decode()


def image(size: int, mime: str = "image/png") -> Attachment:
    return Attachment.from_base64("image", mime, b64(b"\x89PNG" + b"x" * (size - 4)))


# -- content ------------------------------------------------------------------------------------

def test_an_image_becomes_a_placeholder_and_an_attachment() -> None:
    raw = b"\x89PNG" + bytes(range(200))
    out = content_output([TextContent(text="caption"),
                          ImageContent(data=b64(raw), mime_type="image/png")])
    [made] = out.attachments
    assert (made.kind, made.mime_type, made.size) == ("image", "image/png", len(raw))
    assert made.sha256 == hashlib.sha256(raw).hexdigest()
    assert out.text == f"caption\n[image: image/png, 204 B, sha256 {made.sha256[:16]}]"


def test_content_that_is_not_base64_says_so_and_is_not_attached() -> None:
    out = content_output([ImageContent(data="not base64!", mime_type="image/png")])
    assert out.attachments == []
    assert out.text == "[image: image/png, unreadable: the image content is not valid base64]"


def test_links_and_embedded_resources() -> None:
    blocks = [ResourceLink(uri="file:///a.txt", name="a", mime_type="text/plain"),
              EmbeddedResource(resource=TextResourceContents(uri="x://t", text="inline")),
              EmbeddedResource(resource=BlobResourceContents(
                  uri="x://j", mime_type="application/json", blob=b64(b'{"a": 1}'))),
              EmbeddedResource(resource=BlobResourceContents(
                  uri="x://z", mime_type="application/zip", blob=b64(b"PK\x03\x04")))]
    out = content_output(blocks, read_tool="docs_read_resource")
    lines = out.text.split("\n")
    assert lines[0] == ('[resource link: file:///a.txt (a, text/plain); read it with the tool '
                        'docs_read_resource and uri="file:///a.txt"]')
    assert lines[1:3] == ["inline", '{"a": 1}']
    assert lines[3].startswith("[blob from x://z: application/zip, 4 B, sha256 ")
    assert [a.source for a in out.attachments] == ["x://z"]
    assert content_output(blocks[:1]).text == "[resource link: file:///a.txt (a, text/plain)]"


def test_structured_content_is_the_text_when_there_is_no_other() -> None:
    result = CallToolResult(content=[], structured_content={"n": 1})
    assert result_text(result) == '{"n": 1}'


def test_a_resource_read_labels_its_parts_when_there_are_several() -> None:
    one = ReadResourceResult(contents=[TextResourceContents(uri="x://a", text="alpha")])
    assert resource_output(one).text == "alpha"
    two = ReadResourceResult(contents=[
        TextResourceContents(uri="x://a", text="alpha"),
        BlobResourceContents(uri="x://b", mime_type="text/plain", blob=b64(b"beta"))])
    assert resource_output(two).text == "[x://a]\nalpha\n\n[x://b]\nbeta"
    assert resource_output(ReadResourceResult(contents=[])).text == "(the resource is empty)"


# -- attachments in the journal and the message ---------------------------------------------------

def test_the_journal_keeps_small_content_whole_and_big_content_by_digest() -> None:
    small, big = image(JOURNAL_INLINE_LIMIT), image(JOURNAL_INLINE_LIMIT + 1)
    assert small.to_journal()["data"] == small.data
    assert "data" not in big.to_journal()
    assert big.to_journal()["sha256"] == big.sha256 and big.to_journal()["size"] == big.size
    message = {"role": "tool", "content": "x", "attachments": [small.to_message()]}
    assert message_attachments(message) == [small]
    assert without_bytes(message)["attachments"] == [
        {k: v for k, v in small.to_message().items() if k != "data"}]
    assert message_attachments(without_bytes(message)) == []


def test_a_resumed_run_gets_its_small_images_back() -> None:
    small, big = image(100), image(JOURNAL_INLINE_LIMIT + 1)
    entries = [
        JournalEntry("p", EntryType.MODEL_USAGE, {"step": 1, "turn": 0, "tool_calls": [
            {"name": "shot", "args": {}, "call_id": "c1"},
            {"name": "shot", "args": {}, "call_id": "c2"}]}),
        JournalEntry("p", EntryType.TOOL_INTENT, {"step": 2, "call_id": "c1", "effect": "read"}),
        JournalEntry("p", EntryType.TOOL_RESULT, {"step": 2, "tool": "shot", "call_id": "c1",
                                                  "result": "[image]", "ok": True,
                                                  "attachments": [small.to_journal()]}),
        JournalEntry("p", EntryType.TOOL_INTENT, {"step": 3, "call_id": "c2", "effect": "read"}),
        JournalEntry("p", EntryType.TOOL_RESULT, {"step": 3, "tool": "shot", "call_id": "c2",
                                                  "result": "[image]", "ok": True,
                                                  "attachments": [big.to_journal()]})]
    history = rebuild_run(entries).history
    assert message_attachments(history[1]) == [small]
    assert "attachments" not in history[2]


# -- the model wire formats -----------------------------------------------------------------------

def conversation(*attachments: Attachment) -> list[dict[str, Any]]:
    return [{"role": "user", "content": "look"},
            {"role": "assistant", "content": "", "tool_calls": [
                {"id": "c1", "name": "shot", "args": {}},
                {"id": "c2", "name": "note", "args": {}}]},
            {"role": "tool", "tool_call_id": "c1", "name": "shot", "content": "[image]",
             "attachments": [a.to_message() for a in attachments]},
            {"role": "tool", "tool_call_id": "c2", "name": "note", "content": "plain"},
            {"role": "assistant", "content": "seen"}]


def test_openai_images_follow_the_turns_tool_messages_in_one_user_message() -> None:
    png, svg = image(50), image(50, "image/svg+xml")
    out = to_openai_messages(conversation(png, svg))
    assert [m["role"] for m in out] == ["user", "assistant", "tool", "tool", "user", "assistant"]
    assert out[2]["content"] == "[image]"  # tool messages stay text
    parts = out[4]["content"]
    assert parts[0]["type"] == "text" and "shot (call c1)" in parts[0]["text"]
    assert parts[1] == {"type": "image_url",
                        "image_url": {"url": f"data:image/png;base64,{png.data}"}}
    assert len(parts) == 2  # svg is not an image type the API takes: it stays a placeholder
    assert [m["role"] for m in to_openai_messages(conversation(png), images=False)] == [
        "user", "assistant", "tool", "tool", "assistant"]


def test_anthropic_images_go_inside_the_tool_result() -> None:
    png = image(50)
    _, messages = to_anthropic(conversation(png))
    result = messages[2]["content"][0]
    assert result["type"] == "tool_result" and result["tool_use_id"] == "c1"
    assert result["content"] == [
        {"type": "text", "text": "[image]"},
        {"type": "image", "source": {"type": "base64", "media_type": "image/png",
                                     "data": png.data}}]
    _, plain = to_anthropic(conversation(png), images=False)
    assert plain[2]["content"][0]["content"] == "[image]"


# -- the log gate and progress throttling ---------------------------------------------------

def test_the_log_gate_lets_a_few_through_per_window_and_counts_the_rest() -> None:
    now = [0.0]
    gate = LogGate(limit=3, window=10.0, clock=lambda: now[0])
    assert [gate.admit() for _ in range(5)] == [True, True, True, False, False]
    assert gate.take_left_out() == 2 and gate.take_left_out() == 0
    now[0] = 10.0
    assert gate.admit() is True


async def test_progress_is_throttled_but_the_latest_value_goes_out() -> None:
    sent: list[ToolProgress] = []

    def make(progress: float, total: float | None, message: str) -> ToolProgress:
        return ToolProgress(process="p", run_id="r", step=1, tool="t", progress=progress,
                            total=total, message=message)

    reporter = ProgressReporter(make, sent.append, interval=0.3)
    for n in range(1, 11):
        reporter(n, 10, f"part {n}")
    assert [e.progress for e in sent] == [1.0]  # the first at once, the rest held back
    await wait_for(lambda: len(sent) == 2, 2, "the latest value")
    assert (sent[1].progress, sent[1].message) == (10.0, "part 10")
    await asyncio.to_thread(reporter, 11, 12, "from a thread")  # a sync tool's worker thread
    await wait_for(lambda: len(sent) == 3, 2, "the thread's report")
    reporter(12, 12, "held back")
    reporter.close()  # the step ended: what was held back is dropped, nothing comes later
    reporter(13, 13, "after the end")
    assert len(sent) == 3 and reporter._timer is None
