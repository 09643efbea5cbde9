"""Long-term memory through AgentProcess and the scripted model: remember / recall / forget
tools, the in_memory and sqlite providers, what survives stop, close and a new process object,
auto-inject, hostile full-text queries, and rewind leaving memory alone."""

from __future__ import annotations

import asyncio
import tempfile
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st
from pydantic import ValidationError

from runtime_core import (
    AgentProcess,
    AgentRuntime,
    ModelRequest,
    ModelTurn,
    ProcessConfig,
    ProcessState,
    Run,
    RunState,
    TriggerEvent,
)
from runtime_core.agent.tools import ToolError
from runtime_core.control import LocalControl
from runtime_core.journal.entry import EntryType
from runtime_core.journal.provider import ReadFilter
from runtime_core.manifest.loader import ManifestError, parse_manifest
from runtime_core.memory import (
    InMemoryMemory,
    MemoryConfig,
    MemoryInjector,
    MemoryItem,
    MemoryProvider,
    MemoryUnavailable,
    SQLiteMemory,
    default_memory_path,
    terms,
)
from tests.helpers.polling import wait_for

#: One scripted model, two scripts picked by the payload: "store" remembers the payload's
#: fact, "ask" recalls with the payload's question; each ends with a reply.
MODEL: dict[str, Any] = {
    "provider": "scripted",
    "select": {"by_payload_field": "script"},
    "scripts": {
        "store": [{"tool_calls": [{"name": "remember",
                                   "args": {"text": "$payload.fact", "tags": ["ops"]}}]},
                  {"reply": "stored"}],
        "ask": [{"tool_calls": [{"name": "recall", "args": {"query": "$payload.q"}}]},
                {"reply": "answered"}],
    },
}
FACT = "The nightly backup of the billing database runs at 02:00 UTC"


#: Everything a test opened, closed after it even when it fails: an open SQLite connection's
#: worker thread would otherwise keep the test session from exiting.
OPENED: list[AgentProcess | MemoryProvider] = []


@pytest.fixture(autouse=True)
async def close_what_was_opened() -> AsyncIterator[None]:
    yield
    while OPENED:
        await OPENED.pop().close()


def process_for(name: str, config: ProcessConfig, **kwargs: Any) -> AgentProcess:
    process = AgentProcess(name, config, **kwargs)
    OPENED.append(process)
    return process


def memory_config(tmp_path: Path, provider: str, **memory: Any) -> ProcessConfig:
    if provider == "sqlite":
        memory.setdefault("path", str(tmp_path / "memory.db"))
    return ProcessConfig(model=MODEL, memory={"provider": provider, **memory})


async def run_payload(process: AgentProcess, payload: dict[str, Any]) -> Run:
    before = len(process.recent_runs())
    await process.inject(TriggerEvent("t", "manual", payload))
    await wait_for(lambda: len(process.recent_runs()) > before, what="the run to finish")
    run = process.recent_runs()[-1]
    assert run.state is RunState.SUCCEEDED, run.error
    return run


def tool_results(run: Run, name: str) -> list[str]:
    return [step.result for step in run.steps if step.kind == "tool" and step.name == name]


async def recall(process: AgentProcess, question: str) -> str:
    return tool_results(await run_payload(process, {"script": "ask", "q": question}),
                        "recall")[0]


PROVIDERS = ["in_memory", "sqlite"]


# -- the tools through a process -------------------------------------------------------------
@pytest.mark.parametrize("provider", PROVIDERS)
async def test_agent_remembers_in_one_run_and_recalls_in_a_later_one(
        tmp_path: Path, provider: str) -> None:
    process = process_for("keeper", memory_config(tmp_path, provider))
    await process.start()
    stored = await run_payload(process, {"script": "store", "fact": FACT})
    assert tool_results(stored, "remember")[0].startswith("Remembered (id=")
    assert process.status()["has_memory"] is True
    assert process.status()["memory"] == {"provider": provider, "open": True, "items": 1,
                                          "auto_inject": False}
    answer = await recall(process, "when does the billing backup run?")
    assert FACT in answer and answer.startswith("- [")
    assert await recall(process, "kubernetes upgrade") == "No memories match."
    assert process.memory is not None
    item = (await process.memory.search("backup"))[0]
    assert item.metadata["tags"] == ["ops"] and item.metadata["run_id"] == stored.run_id
    await process.close()


async def test_forget_removes_an_item_and_says_when_there_is_none(tmp_path: Path) -> None:
    model = {**MODEL, "scripts": {**MODEL["scripts"], "forget": [
        {"tool_calls": [{"name": "forget", "args": {"memory_id": "$payload.id"}}]},
        {"reply": "forgotten"}]}}
    process = process_for("keeper", ProcessConfig(
        model=model, memory={"provider": "sqlite", "path": str(tmp_path / "m.db")}))
    await process.start()
    await run_payload(process, {"script": "store", "fact": FACT})
    assert process.memory is not None
    item_id = (await process.memory.search("backup"))[0].id
    done = await run_payload(process, {"script": "forget", "id": item_id})
    assert tool_results(done, "forget") == [f"Forgot {item_id}."]
    again = await run_payload(process, {"script": "forget", "id": item_id})
    assert tool_results(again, "forget") == [f"No memory with id {item_id!r}."]
    assert await process.memory.search("backup") == []
    assert process.status()["memory"]["items"] == 0
    await process.close()


async def test_memory_tools_are_a_write_a_read_and_a_write(tmp_path: Path) -> None:
    process = process_for("keeper", ProcessConfig(
        model=MODEL, memory={"provider": "in_memory"},
        journal={"level": "checkpoint", "backend": "memory"}))
    await process.start()
    await run_payload(process, {"script": "store", "fact": FACT})
    await recall(process, "backup")
    assert process.journal is not None
    await process.journal.flush()
    intents = await process.journal.read(ReadFilter(process="keeper",
                                                    entry_type=EntryType.TOOL_INTENT))
    assert {(e.data["tool"], e.data["effect"]) for e in intents} == {
        ("remember", "write"), ("recall", "read")}
    await process.close()


async def test_without_a_provider_there_is_no_memory_and_no_tools() -> None:
    process = process_for("plain", ProcessConfig(model=MODEL))
    await process.start()
    run = await run_payload(process, {"script": "ask", "q": "backup"})
    assert run.steps[1].kind == "refused" and "unknown tool 'recall'" in run.steps[1].result
    status = process.status()
    assert status["has_memory"] is False and "memory" not in status
    assert process.memory is None
    await process.close()


async def test_tools_false_keeps_memory_but_offers_no_tools(tmp_path: Path) -> None:
    process = process_for("keeper", memory_config(tmp_path, "in_memory", tools=False))
    await process.start()
    run = await run_payload(process, {"script": "store", "fact": FACT})
    assert run.steps[1].kind == "refused" and "unknown tool 'remember'" in run.steps[1].result
    assert process.memory is not None and process.memory.is_open
    await process.close()


async def test_a_tool_named_like_a_memory_tool_fails_the_start(tmp_path: Path) -> None:
    async def recall(query: str) -> str:
        return "mine"

    process = process_for("keeper", memory_config(tmp_path, "in_memory"), tools=[recall])
    with pytest.raises(ToolError, match="name of a memory tool"):
        await process.start()
    assert process.state is ProcessState.FAILED
    await process.close()


# -- what survives what (the spec's table) --------------------------------------------------
async def test_sqlite_memory_persists_in_a_new_process_object(tmp_path: Path) -> None:
    config = memory_config(tmp_path, "sqlite")
    first = process_for("keeper", config)
    await first.start()
    await run_payload(first, {"script": "store", "fact": FACT})
    await first.close()
    second = process_for("keeper", config)
    await second.start()
    assert second.status()["memory"]["items"] == 1
    assert FACT in await recall(second, "billing backup")
    await second.close()
    other = process_for("stranger", config)  # same file, another process: its own items
    await other.start()
    assert await recall(other, "billing backup") == "No memories match."
    await other.close()


async def test_in_memory_does_not_persist_in_a_new_process_object(tmp_path: Path) -> None:
    config = memory_config(tmp_path, "in_memory")
    first = process_for("keeper", config)
    await first.start()
    await run_payload(first, {"script": "store", "fact": FACT})
    await first.close()
    second = process_for("keeper", config)
    await second.start()
    assert await recall(second, "billing backup") == "No memories match."
    await second.close()


@pytest.mark.parametrize("provider", PROVIDERS)
async def test_stop_and_start_keep_the_provider_open(tmp_path: Path, provider: str) -> None:
    process = process_for("keeper", memory_config(tmp_path, provider))
    await process.start()
    await run_payload(process, {"script": "store", "fact": FACT})
    provider_before = process.memory
    await process.stop()
    assert provider_before is not None and provider_before.is_open  # stop() keeps it
    assert process.status()["memory"]["open"] is True
    await process.start()
    assert process.memory is provider_before
    assert FACT in await recall(process, "billing backup")
    await process.close()


@pytest.mark.parametrize("provider", PROVIDERS)
async def test_close_closes_the_provider_and_start_opens_a_new_one(
        tmp_path: Path, provider: str) -> None:
    process = process_for("keeper", memory_config(tmp_path, provider))
    await process.start()
    await run_payload(process, {"script": "store", "fact": FACT})
    old = process.memory
    await process.close()
    assert old is not None and not old.is_open
    assert process.status()["memory"] == {"provider": provider, "open": False, "items": None,
                                          "auto_inject": False}
    with pytest.raises(MemoryUnavailable, match="closed"):
        await old.search("backup")
    await process.start()
    assert process.memory is not None and process.memory is not old and process.memory.is_open
    answer = await recall(process, "billing backup")
    if provider == "in_memory":
        assert answer == "No memories match."  # a new in_memory provider starts empty
    else:
        assert FACT in answer  # a new sqlite provider opens the same file
    await process.close()


async def test_sqlite_memory_defaults_to_a_file_beside_the_journal(tmp_path: Path) -> None:
    journal = tmp_path / "state" / "journal.db"
    assert default_memory_path(journal) == tmp_path / "state" / "journal.memory.db"
    assert default_memory_path(None) == Path(".promptui/memory.db")
    process = process_for("keeper", ProcessConfig(
        model=MODEL, memory={"provider": "sqlite"},
        journal={"level": "checkpoint", "path": str(journal)}))
    await process.start()
    await run_payload(process, {"script": "store", "fact": FACT})
    await process.close()
    assert (tmp_path / "state" / "journal.memory.db").exists()
    assert isinstance(process.memory, SQLiteMemory)
    assert process.memory.path == tmp_path / "state" / "journal.memory.db"


async def test_an_unreadable_memory_file_fails_the_start_and_says_what_to_do(
        tmp_path: Path) -> None:
    (tmp_path / "memory.db").write_bytes(b"not a database, just bytes" * 100)
    process = process_for("keeper", memory_config(tmp_path, "sqlite"))
    with pytest.raises(MemoryUnavailable, match=r"cannot be opened.*move the file aside"):
        await process.start()
    assert process.state is ProcessState.FAILED
    assert (tmp_path / "memory.db").read_bytes().startswith(b"not a database")  # untouched


# -- auto-inject -----------------------------------------------------------------------------
class PromptRecorder:
    name = "prompt-recorder"

    def __init__(self) -> None:
        self.prompts: list[list[dict[str, Any]]] = []

    async def complete(self, request: ModelRequest) -> ModelTurn:
        self.prompts.append([dict(m) for m in request.messages])
        return ModelTurn(reply="ok")


def memory_messages(prompt: list[dict[str, Any]]) -> list[str]:
    return [m["content"] for m in prompt
            if m["role"] == "system" and m["content"].startswith("[Long-term memory]")]


@pytest.mark.parametrize("provider", PROVIDERS)
async def test_auto_inject_puts_the_best_matches_in_the_prompt(
        tmp_path: Path, provider: str) -> None:
    model = PromptRecorder()
    process = process_for("keeper", ProcessConfig(
        memory={"provider": provider, "auto_inject": True, "inject_limit": 2,
                **({"path": str(tmp_path / "m.db")} if provider == "sqlite" else {})},
        journal={"level": "full", "backend": "memory"}), model=model)
    await process.start()
    assert process.memory is not None
    await process.memory.add("billing backup runs at 02:00 UTC")
    await process.memory.add("billing invoices are sent on the first of the month")
    await process.memory.add("the billing backup is kept for 30 days")
    await process.memory.add("the cafeteria opens at eight")
    await run_payload(process, {"text": "is the billing backup done?"})
    blocks = memory_messages(model.prompts[-1])
    assert len(blocks) == 1
    lines = blocks[0].splitlines()[1:]
    assert len(lines) == 2  # inject_limit
    assert all("backup" in line for line in lines)
    assert not any("cafeteria" in line for line in lines)
    # the memory block sits before the conversation and the trigger's user message
    roles = [m["role"] for m in model.prompts[-1]]
    assert roles[-1] == "user" and model.prompts[-1].index(
        next(m for m in model.prompts[-1] if m["content"] == blocks[0])) < len(roles) - 1
    # the full-level journal keeps the prompt, memory block included
    assert process.journal is not None
    await process.journal.flush()
    usage = await process.journal.read(ReadFilter(process="keeper",
                                                  entry_type=EntryType.MODEL_USAGE))
    assert any(m["content"] == blocks[0] for m in usage[-1].data["prompt"])
    await run_payload(process, {"text": "what about kubernetes?"})
    assert memory_messages(model.prompts[-1]) == []  # nothing matches: no block
    await process.close()


async def test_auto_inject_respects_min_score(tmp_path: Path) -> None:
    model = PromptRecorder()
    process = process_for("keeper", ProcessConfig(
        memory={"provider": "in_memory", "auto_inject": True, "min_score": 0.75}), model=model)
    await process.start()
    assert process.memory is not None
    await process.memory.add("alpha beta")
    await process.memory.add("alpha only")
    await run_payload(process, {"q": "alpha beta"})  # the payload's values, not its keys
    lines = memory_messages(model.prompts[-1])[0].splitlines()[1:]
    assert len(lines) == 1 and "alpha beta" in lines[0]
    await process.close()


async def test_a_failing_store_never_fails_the_run() -> None:
    class Broken:
        kind = "in_memory"
        process = "keeper"

        async def search(self, query: str, limit: int = 5, *, min_score: float = 0.0
                         ) -> list[MemoryItem]:
            raise MemoryUnavailable("disk gone")

    class Slow(Broken):
        async def search(self, query: str, limit: int = 5, *, min_score: float = 0.0
                         ) -> list[MemoryItem]:
            await asyncio.sleep(10)
            return []

    event = TriggerEvent("t", "manual", {"text": "x"})
    broken: Any = Broken()
    assert await MemoryInjector(broken, MemoryConfig(provider="in_memory")).__call__(
        event) is None
    slow: Any = Slow()
    fast = MemoryConfig(provider="in_memory", inject_timeout=0.01)
    assert await MemoryInjector(slow, fast)(event) is None


# -- the providers directly: hostile queries, the word rule ----------------------------------
HOSTILE = ['"', '""', "(", ")", "a AND", "AND", "OR OR", "NOT x", "NEAR(a b, 2)", "*", "a*",
           "^start", "col:value", "-minus", "+plus", "{a b}", "'", "\\", "\x00", "", "   ",
           "x" * 5000, "a" + " b" * 500, "ünïcödé", "名前", "🙂", "a_b", "%", "_"]


async def open_provider(kind: str, folder: Path, name: str = "p") -> MemoryProvider:
    provider: MemoryProvider = InMemoryMemory(name) if kind == "in_memory" \
        else SQLiteMemory(name, folder / "memory.db")
    await provider.open()
    OPENED.append(provider)
    return provider


@pytest.mark.parametrize("provider_kind", PROVIDERS)
async def test_any_query_text_is_safe(tmp_path: Path, provider_kind: str) -> None:
    provider = await open_provider(provider_kind, tmp_path)
    for text in HOSTILE:
        await provider.add(f"note: {text}")
    await provider.add("the NEAR and AND operators are plain words here")
    for query in HOSTILE:
        found = await provider.search(query, 50)
        assert all(0 < item.score <= 1 for item in found)
    assert await provider.search("") == [] and await provider.search("  \n") == []
    assert await provider.search("anything", 0) == []
    found = await provider.search("NEAR AND")
    assert found and "operators" in found[0].text  # the item with both words comes first
    assert await provider.delete("no-such-id") is False
    await provider.close()


@pytest.mark.parametrize("provider_kind", PROVIDERS)
async def test_search_is_scoped_ranked_and_scored(tmp_path: Path, provider_kind: str) -> None:
    mine = await open_provider(provider_kind, tmp_path, "mine")
    await mine.add("Backups run nightly", {"k": 1})
    await mine.add("backup backup retention policy for backups")
    item_id = await mine.add("database BACKUP window")
    if provider_kind == "sqlite":
        theirs = await open_provider(provider_kind, tmp_path, "theirs")
        await theirs.add("backup of somebody else")
        assert mine.item_count == 3 and theirs.item_count == 1
        await theirs.close()
    found = await mine.search("database backup")
    assert found[0].text == "database BACKUP window"  # both words: best
    assert found[0].id == item_id and found[0].score == 1.0
    assert all(i.score == 0.5 for i in found[1:]) and len(found) == 2  # "backups" != "backup"
    assert (await mine.search("nightly"))[0].metadata == {"k": 1}
    assert await mine.search("database backup", min_score=0.75) == found[:1]
    assert await mine.delete(item_id) is True and mine.item_count == 2
    await mine.close()


async def test_both_providers_rank_alike(tmp_path: Path) -> None:
    notes = ["billing backup runs at 02:00 UTC", "billing invoices go out on the first",
             "the billing backup is kept for 30 days", "the cafeteria opens at eight",
             "backup restore drill every quarter", "the the the the"]
    queries = ["is the billing backup done?", "the", "cafeteria backup", "restore drill"]
    ranked: list[list[list[str]]] = []
    for kind in PROVIDERS:
        provider = await open_provider(kind, tmp_path)
        for note in notes:
            await provider.add(note)
        ranked.append([[i.text for i in await provider.search(q, 10)] for q in queries])
    assert ranked[0] == ranked[1]
    assert ranked[0][0][:2] == ["the billing backup is kept for 30 days",
                                "billing backup runs at 02:00 UTC"]  # rare words weigh more


@pytest.mark.parametrize("provider_kind", PROVIDERS)
@settings(max_examples=40, deadline=None)
@given(texts=st.lists(st.text(min_size=1, max_size=60), min_size=1, max_size=5),
       data=st.data())
def test_any_text_is_found_by_one_of_its_words(provider_kind: str, texts: list[str],
                                                data: st.DataObject) -> None:
    assume(any(terms(text) for text in texts))

    words = [data.draw(st.sampled_from(terms(text))) if terms(text) else "" for text in texts]

    async def scenario(folder: Path) -> None:
        provider = await open_provider(provider_kind, folder)
        try:
            ids = [await provider.add(text) for text in texts]
            for item_id, text, word in zip(ids, texts, words, strict=True):
                if word:
                    found = await provider.search(word, len(texts))
                    assert item_id in [item.id for item in found], (text, word)
        finally:
            OPENED.remove(provider)  # closed on this loop, before asyncio.run ends
            await provider.close()

    with tempfile.TemporaryDirectory() as folder:
        asyncio.run(scenario(Path(folder)))


def test_words_fold_case_width_and_accents() -> None:
    assert terms("Hello, WORLD! snake_case") == ["hello", "world", "snake", "case"]
    assert terms("\uff26\uff55\uff4c\uff4c width") == terms("full WIDTH")  # full-width
    assert terms("cafe\u0301") == terms("café")
    assert terms("--- ... !!!") == []


# -- rewind never rolls memory back ----------------------------------------------------------
async def test_rewind_leaves_memory_in_place_and_the_plan_says_so(tmp_path: Path) -> None:
    process = process_for("keeper", ProcessConfig(
        model=MODEL, memory={"provider": "sqlite", "path": str(tmp_path / "m.db")},
        journal={"level": "checkpoint", "backend": "memory"}))
    await process.start()
    first = await run_payload(process, {"script": "store", "fact": FACT})
    await run_payload(process, {"script": "store", "fact": "the deploy freeze starts Friday"})
    assert process.journal is not None
    await process.journal.flush()
    starts = await process.journal.read(ReadFilter(process="keeper",
                                                   entry_type=EntryType.RUN_STARTED))
    target = next(e for e in starts if e.run_id == first.run_id)
    plan = await process.rewind_plan(target.entry_id)
    assert "long-term memory" in plan.not_rolled_back
    assert [e.tool for e in plan.outside_effects] == ["remember", "remember"]
    await process.rewind(target.entry_id, "both")
    assert process.conversation.messages() == []
    assert process.memory is not None and process.memory.item_count == 2
    assert FACT in await recall(process, "billing backup")
    assert "deploy freeze" in await recall(process, "deploy freeze")
    await process.close()


# -- the control room ------------------------------------------------------------------------
async def test_the_control_plane_shows_memory_with_governance(tmp_path: Path) -> None:
    async with AgentRuntime() as runtime:
        process = runtime.add_process("keeper", memory_config(tmp_path, "sqlite"))
        plain = runtime.add_process("plain", ProcessConfig(model=MODEL))
        await process.start()
        await run_payload(process, {"script": "store", "fact": FACT})
        control = LocalControl(runtime)
        detail = await control.process_detail("keeper")
        assert detail.governance["memory"] == {"provider": "sqlite", "open": True, "items": 1,
                                               "auto_inject": False}
        assert "memory" not in (await control.process_detail("plain")).governance
        assert plain.status()["has_memory"] is False
    assert process.memory is not None and not process.memory.is_open  # runtime close closes


# -- configuration ---------------------------------------------------------------------------
def test_memory_config_refuses_what_cannot_work() -> None:
    with pytest.raises(ValidationError, match="applies to the sqlite provider"):
        ProcessConfig(memory={"provider": "in_memory", "path": "x.db"})
    with pytest.raises(ValidationError, match="auto_inject needs a provider"):
        ProcessConfig(memory={"auto_inject": True})
    with pytest.raises(ValidationError, match="inject_limit"):
        ProcessConfig(memory={"provider": "in_memory", "inject_limit": 0})
    with pytest.raises(ValidationError, match="provider"):
        ProcessConfig(memory={"provider": "chroma"})
    with pytest.raises(ValidationError, match="rememberr"):
        ProcessConfig(memory={"provider": "in_memory", "rememberr": True})
    assert ProcessConfig().memory.provider == "none"


def test_manifest_memory_key() -> None:
    manifest = parse_manifest(
        "name: a\nmemory: {provider: sqlite, path: /tmp/x.db, auto_inject: true}\n",
        Path("a.agent"))
    assert manifest.config.memory.provider == "sqlite"
    assert manifest.config.memory.auto_inject is True
    with pytest.raises(ManifestError, match=r"memory\.inject_limt"):
        parse_manifest("name: a\nmemory: {provider: in_memory, inject_limt: 2}\n",
                       Path("a.agent"))
