"""The spec's five rewind modes through a served runtime (issue 35): RemoteControl over HTTP and
``promptui rewind --url`` (the attached CLI) plan and apply each one. The in-process and
in-memory HTTP roads are in test_spec_api.py."""

from __future__ import annotations

from pathlib import Path

import pytest

from runtime_core.control import RemoteControl
from tests.helpers.cli import run_promptui_async
from tests.helpers.rewinds import booked_twice, books_runtime, what_mode_did
from tests.helpers.serving import TOKEN, served

pytestmark = pytest.mark.slow

SPEC_MODES = ["both", "conversation_only", "code_only", "summarize", "cancel"]


@pytest.mark.parametrize("mode", SPEC_MODES)
async def test_remote_control_plans_and_rewinds_in_every_mode(mode: str) -> None:
    runtime = books_runtime()
    async with served(runtime) as url:
        process = runtime.get_process("books")
        target = await booked_twice(process)
        remote = RemoteControl(url, token=TOKEN)
        try:
            assert (await remote.rewind_plan("books", target, mode)).mode.value == mode
            assert (await remote.rewind("books", target, mode)).plan.mode.value == mode
        finally:
            await remote.close()
        assert what_mode_did(process, messages_before=4) == mode


@pytest.mark.parametrize("mode", SPEC_MODES)
async def test_the_attached_cli_plans_and_rewinds_in_every_mode(mode: str,
                                                                tmp_path: Path) -> None:
    runtime = books_runtime()
    async with served(runtime) as url:
        process = runtime.get_process("books")
        target = await booked_twice(process)
        server = ["--url", url, "--token", TOKEN]
        status, out, err = await run_promptui_async(
            "rewind", "books", target, "--mode", mode, "--plan", *server, cwd=tmp_path)
        assert status == 0, err
        assert f"mode {mode}" in out
        status, out, err = await run_promptui_async(
            "rewind", "books", target, "--mode", mode, "--apply", "--yes", *server,
            cwd=tmp_path)
        if mode == "cancel":
            assert status != 0 and "cancel only previews" in err + out
        else:
            assert status == 0, err
            assert "Rewound books" in out
        assert what_mode_did(process, messages_before=4) == mode
