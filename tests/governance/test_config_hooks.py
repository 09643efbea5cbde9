"""Hooks in configuration (issue 35): ``ProcessConfig(hooks=[...])`` and a manifest's
``hooks:`` section are registered on ``process.hooks``: a callback (an async function or its
import path) or a command (the event on stdin as JSON, an answer on stdout that may block or
rewrite). A bad entry is an error naming its place and the fix."""

from __future__ import annotations

import json
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest
from pydantic import ValidationError

from runtime_core import AgentProcess, ProcessConfig, TriggerEvent
from runtime_core.governance.hooks import HookContext, HookEvent
from runtime_core.manifest.loader import ManifestError, check_start, load_manifest, parse_manifest
from tests.helpers.polling import wait_for

SEEN: list[str] = []


async def remember(ctx: HookContext) -> None:
    SEEN.append(f"{ctx.event.value}:{ctx.process}")


def scripted() -> dict[str, Any]:
    return {"provider": "scripted", "turns": [{"reply": "done"}]}


async def test_callbacks_from_the_config_are_on_process_hooks_and_run() -> None:
    SEEN.clear()
    config = ProcessConfig(model=scripted(), hooks=[
        {"event": "session_start", "callback": remember},
        {"event": "run_end", "callback": f"{__name__}:remember", "priority": 5}])
    process = AgentProcess("hooked", config)
    assert len(process.hooks.registered(HookEvent.SESSION_START)) == 1
    assert len(process.hooks) == 2 and process.status()["hook_count"] == 2
    await process.start()
    await process.inject(TriggerEvent("t", "manual", {}))
    await wait_for(lambda: "run_end:hooked" in SEEN)
    await process.stop()
    assert SEEN == ["session_start:hooked", "run_end:hooked"]


def _hook_script(tmp_path: Path, answer: dict[str, Any]) -> list[str]:
    script = tmp_path / "hook.py"
    script.write_text(textwrap.dedent(f"""
        import json, pathlib, sys
        event = json.load(sys.stdin)
        pathlib.Path("seen.jsonl").open("a").write(json.dumps(event) + "\\n")
        print(json.dumps({answer!r}))
    """))
    return [sys.executable, str(script)]


@pytest.mark.slow  # starts a subprocess per hook call
async def test_a_manifest_command_hook_sees_the_event_and_may_refuse_the_run(
        tmp_path: Path) -> None:
    command = _hook_script(tmp_path, {"block": True, "reason": "not today"})
    (tmp_path / "a.agent").write_text(
        "name: guarded\nmodel: echo\njournal: {level: none}\nhooks:\n"
        f"  - event: user_prompt_submit\n    command: {json.dumps(command)}\n")
    manifest = load_manifest(tmp_path / "a.agent")
    process = AgentProcess("guarded", manifest.config, base_dir=manifest.base_dir)
    await process.start()
    await process.inject(TriggerEvent("t", "manual", {"n": 1}))
    await wait_for(lambda: len(process.dead_letters) == 1, timeout=20)
    await process.stop()
    assert process.dead_letters[0]["reason"] == "blocked by hook"
    assert process.invocation_count == 0
    seen = json.loads((tmp_path / "seen.jsonl").read_text().splitlines()[0])
    assert (seen["event"], seen["process"]) == ("user_prompt_submit", "guarded")


def test_bad_entries_say_where_and_what_to_write(tmp_path: Path) -> None:
    text = ("name: bad\nmodel: echo\nhooks:\n"
            "  - event: session_start\n"
            "  - event: task_completed\n    command: ./notify.sh\n"
            "  - event: on_lunch\n    callback: pkg.mod:fn\n")
    with pytest.raises(ManifestError) as caught:
        parse_manifest(text, tmp_path / "bad.agent")
    said = str(caught.value)
    assert "bad.agent:4:5: hooks[0]" in said and "exactly one of callback" in said
    assert "hooks[1].event" in said and "use run_end" in said
    assert "hooks[2].event" in said and "unknown hook event 'on_lunch'" in said
    with pytest.raises(ValidationError, match="must be an async function"):
        ProcessConfig(hooks=[{"event": "run_end", "callback": print}])
    config = ProcessConfig(hooks=[{"event": "run_end", "callback": "no_such_module_x:fn"}])
    with pytest.raises(ValueError, match=r"hooks\[0\]: hook callback 'no_such_module_x:fn': "
                                         "cannot import module"):
        AgentProcess("p", config)


def test_a_config_with_hooks_dumps_their_import_paths() -> None:
    config = ProcessConfig(hooks=[{"event": "session_end", "callback": remember},
                                  {"event": "run_end", "command": "notify --to ops"}])
    dumped = config.model_dump(mode="json")["hooks"]
    assert dumped[0]["callback"] == f"{__name__}:remember"
    assert dumped[1]["command"] == ["notify", "--to", "ops"]


def test_validate_checks_the_hook_program_and_callback_module(tmp_path: Path) -> None:
    (tmp_path / "a.agent").write_text(
        "name: a\nmodel: echo\nhooks:\n"
        "  - {event: session_start, command: [./hooks/announce.sh]}\n"
        "  - {event: run_end, callback: 'no_such_module_zz:fn'}\n"
        "  - {event: run_end, callback: 'beside:fn'}\n")
    (tmp_path / "beside.py").write_text("async def fn(ctx):\n    pass\n")
    [report] = check_start([load_manifest(tmp_path / "a.agent")])
    assert [f"{p.line}:{p.path}" for p in report.warnings] == ["4:hooks[0].command"]
    assert "./hooks/announce.sh' is not there" in report.warnings[0].message
    assert [f"{p.line}:{p.path}" for p in report.errors] == ["5:hooks[1].callback"]
    assert "module 'no_such_module_zz' is not found" in report.errors[0].message
