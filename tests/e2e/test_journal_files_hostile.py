"""``promptui serve`` on a journal folder another user could tamper with (issue 32): a
``journal.db.lock`` link planted before the start, a folder others can write. Each is refused
with one line and exit status 2 before anything starts, and the link's target is never
written."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.helpers.cli import run_promptui_async

pytestmark = pytest.mark.slow


async def test_serve_refuses_a_planted_lock_link_and_leaves_its_target(tmp_path: Path) -> None:
    victim = tmp_path / "victim.txt"
    victim.write_text("someone's file\n")
    (tmp_path / "journal.db.lock").symlink_to(victim)
    status, _, err = await run_promptui_async("serve", "--port", "0", "--journal",
                                              str(tmp_path / "journal.db"), cwd=tmp_path)
    assert status == 2, err
    assert "Traceback" not in err and len(err.strip().splitlines()) == 1
    assert "journal.db.lock" in err and "symbolic link" in err
    assert victim.read_text() == "someone's file\n"
    assert not (tmp_path / "journal.db").exists()


@pytest.mark.parametrize("loose", [0o777, 0o775], ids=oct)
async def test_serve_refuses_a_folder_others_can_write(tmp_path: Path, loose: int) -> None:
    folder = tmp_path / "shared"
    folder.mkdir()
    folder.chmod(loose)
    status, _, err = await run_promptui_async("serve", "--port", "0", "--journal",
                                              str(folder / "journal.db"), cwd=tmp_path)
    assert status == 2, err
    assert "Traceback" not in err and len(err.strip().splitlines()) == 1
    assert f"chmod go-w {folder}" in err
    assert list(folder.iterdir()) == []  # nothing written there
