"""A server's question answered from outside the process: the HTTP API (``GET .../waiting``,
``POST .../elicitation``, with RemoteControl over it) and the ``promptui answer`` command in a
subprocess, against a real served runtime (uvicorn on 127.0.0.1, port 0) running the asking
server over stdio."""

from __future__ import annotations

import asyncio
import json
import os
from pathlib import Path

import httpx
import pytest

from runtime_core import AgentRuntime, TriggerEvent
from runtime_core.control import RemoteControl
from tests.helpers.cli import promptui_command
from tests.helpers.cli import run_promptui_async as cli
from tests.helpers.elicitation import BOOK, config, finished, tool_result, waiting_question
from tests.helpers.serving import TOKEN, served

pytestmark = pytest.mark.slow

AUTH = {"Authorization": f"Bearer {TOKEN}"}


def runtime_with_asking_process() -> AgentRuntime:
    runtime = AgentRuntime()
    runtime.add_process("p", config(BOOK, {"reply": "booked"}))
    return runtime


async def test_the_api_shows_the_question_and_takes_the_answer() -> None:
    runtime = runtime_with_asking_process()
    await runtime.start_all()
    process = runtime.get_process("p")
    async with served(runtime) as url, httpx.AsyncClient(base_url=f"{url}/api/v1",
                                                         headers=AUTH, timeout=30) as http:
        await process.inject(TriggerEvent("t", "manual", {}))
        run = await waiting_question(process)
        base = f"/processes/p/runs/{run.run_id}"
        shown = (await http.get(f"{base}/waiting")).json()
        assert shown["reason"] == "elicitation" and shown["server"] == "asking"
        assert shown["requested_schema"]["required"] == ["name", "seats"]

        bad = await http.post(f"{base}/elicitation",
                              json={"action": "accept", "content": {"name": "Ann"}})
        assert bad.status_code == 422
        assert bad.json()["error"]["code"] == "INVALID_REQUEST"
        assert "seats: required" in bad.json()["error"]["message"]
        wrong = await http.post(f"{base}/elicitation", json={"action": "maybe"})
        assert wrong.status_code == 422

        good = await http.post(f"{base}/elicitation", json={
            "action": "accept", "content": {"name": "Ann", "seats": 3, "window": True}})
        assert good.status_code == 200, good.text
        assert good.json() == {"name": "p", "run_id": run.run_id, "action": "accept"}
        done = await finished(process)
        assert json.loads(tool_result(done, "book").removeprefix("accept "))["seats"] == 3
        again = await http.post(f"{base}/elicitation", json={"action": "cancel"})
        assert again.status_code == 409 and "no run" in again.json()["error"]["message"]
        paths = (await http.get("/openapi.json")).json()["paths"]
        declared = paths["/api/v1/processes/{name}/runs/{run_id}/elicitation"]["post"]
        assert {"200", "404", "409", "422"} <= set(declared["responses"])


async def test_remote_control_declines_over_http() -> None:
    runtime = runtime_with_asking_process()
    await runtime.start_all()
    process = runtime.get_process("p")
    async with served(runtime) as url:
        remote = RemoteControl(url, token=TOKEN)
        try:
            await process.inject(TriggerEvent("t", "manual", {}))
            run = await waiting_question(process)
            views = await remote.runs("p", state="waiting")
            assert [v.waiting_reason for v in views] == ["elicitation"]
            await remote.answer_elicitation("p", run.run_id, "decline")
            assert tool_result(await finished(process), "book") == "decline"
        finally:
            await remote.close()


async def test_promptui_answer_accepts_with_values_from_the_command_line(
        tmp_path: Path) -> None:
    runtime = runtime_with_asking_process()
    await runtime.start_all()
    process = runtime.get_process("p")
    async with served(runtime) as url:
        await process.inject(TriggerEvent("t", "manual", {}))
        run = await waiting_question(process)
        where = ("--url", url, "--token", TOKEN)
        # No terminal and no answer: it shows the question and refuses to guess.
        code, out, err = await cli("answer", "p", run.run_id[:8], *where, cwd=tmp_path)
        assert code == 2 and "not asked, as stdin is not a terminal" in err
        assert "Booking LH123" in out and "seats (integer, 1..9, required)" in out
        code, _, err = await cli("answer", "p", run.run_id[:8], "--accept", "seats=ten",
                                 *where, cwd=tmp_path)
        assert code == 2 and "expected a number" in err
        code, _, err = await cli("answer", "p", run.run_id[:8], "--accept", "name=Cy",
                                 *where, cwd=tmp_path)
        assert code == 2 and "seats: required" in err
        assert process.waiting_runs() != []  # nothing was sent

        code, out, err = await cli("answer", "p", run.run_id[:8], "--accept", "name=Cy",
                                   "--accept", "seats=3", "--accept", "window=yes",
                                   "--accept", "meal=veggie", *where, cwd=tmp_path)
        assert code == 0, err
        assert f"p: run {run.run_id[:8]} answered accept" in out
        done = await finished(process)
        assert json.loads(tool_result(done, "book").removeprefix("accept ")) == {
            "meal": "veggie", "name": "Cy", "seats": 3, "window": True}


async def test_promptui_answer_cancels(tmp_path: Path) -> None:
    runtime = runtime_with_asking_process()
    await runtime.start_all()
    process = runtime.get_process("p")
    async with served(runtime) as url:
        await process.inject(TriggerEvent("t", "manual", {}))
        run = await waiting_question(process)
        code, out, err = await cli("answer", "p", run.run_id, "--cancel", "--url", url,
                                   "--token", TOKEN, cwd=tmp_path)
        assert code == 0, err
        assert "answered cancel" in out
        assert tool_result(await finished(process), "book") == "cancel"
        code, _, err = await cli("answer", "p", run.run_id, "--cancel", "--url", url,
                                 "--token", TOKEN, cwd=tmp_path)
        assert code == 2 and "has no run" in err


async def test_promptui_answer_on_a_terminal_asks_for_each_field(tmp_path: Path) -> None:
    import pty

    runtime = runtime_with_asking_process()
    await runtime.start_all()
    process = runtime.get_process("p")
    async with served(runtime) as url:
        await process.inject(TriggerEvent("t", "manual", {}))
        run = await waiting_question(process)
        master, terminal = pty.openpty()
        try:
            proc = await asyncio.create_subprocess_exec(
                *promptui_command(), "answer", "p", run.run_id[:8], "--url", url, "--token",
                TOKEN, stdin=terminal, stdout=asyncio.subprocess.PIPE,
                stderr=asyncio.subprocess.PIPE, cwd=tmp_path)
            # accept; name; seats: 0 is refused and asked again; window and meal: defaults
            os.write(master, b"accept\nDee\n0\n4\n\n\n")
            out, err = await asyncio.wait_for(proc.communicate(), 60)
        finally:
            os.close(terminal)
            os.close(master)
        assert proc.returncode == 0, err.decode()
        text = out.decode()
        assert "accept, decline or cancel" in text and "Name (string)" in text
        assert "at least 1" in text  # refused as typed, asked again
        done = await finished(process)
        assert json.loads(tool_result(done, "book").removeprefix("accept ")) == {
            "meal": "none", "name": "Dee", "seats": 4, "window": False}
