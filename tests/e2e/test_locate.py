"""``promptui locate``: prints where the config, themes and journal live."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from promptui.cli import app
from promptui.themes import BUNDLED_THEMES_DIR


@pytest.fixture
def env(tmp_path: Path) -> dict[str, str]:
    # An empty PROMPTUI_CONFIG counts as unset, so a developer's own override cannot leak in.
    return {"XDG_CONFIG_HOME": str(tmp_path), "PROMPTUI_CONFIG": ""}


def test_locate_config(tmp_path: Path, env: dict[str, str]) -> None:
    result = CliRunner().invoke(app, ["locate", "config"], env=env)
    assert result.exit_code == 0, result.output
    assert result.stdout.strip() == str(tmp_path / "promptui" / "config.toml")


def test_locate_config_honours_promptui_config(tmp_path: Path, env: dict[str, str]) -> None:
    custom = tmp_path / "elsewhere.toml"
    result = CliRunner().invoke(app, ["locate", "config"],
                                env={**env, "PROMPTUI_CONFIG": str(custom)})
    assert result.stdout.strip() == str(custom)


def test_locate_themes(tmp_path: Path, env: dict[str, str]) -> None:
    result = CliRunner().invoke(app, ["locate", "themes"], env=env)
    assert result.exit_code == 0, result.output
    assert result.stdout.splitlines() == [str(tmp_path / "promptui" / "themes"),
                                          f"bundled: {BUNDLED_THEMES_DIR}"]


def test_locate_journal(tmp_path: Path, env: dict[str, str],
                        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    result = CliRunner().invoke(app, ["locate", "journal"], env=env)
    assert result.exit_code == 0, result.output
    assert result.stdout.strip() == str((tmp_path / ".promptui" / "journal.db").resolve())


def test_locate_unknown_target_exits_2(env: dict[str, str]) -> None:
    result = CliRunner().invoke(app, ["locate", "everything"], env=env)
    assert result.exit_code == 2
    assert result.stdout == ""
    assert "unknown target 'everything'" in result.stderr
    assert "config, themes, journal" in result.stderr
