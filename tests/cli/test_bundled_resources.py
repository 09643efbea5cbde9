"""Where promptui finds its bundled demo and themes (``promptui.bundled``): inside the installed
package when a wheel carries them, the checkout's top-level folders in a source checkout, never
a stray folder beside an installed package; and what an operator is told when they are missing.
The installed wheel itself is tested end to end in tests/e2e/test_installed_wheel.py."""

from __future__ import annotations

import runpy
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

import promptui
from promptui import bundled
from promptui.bundled import demo_manifests_dir, missing_message, themes_dir
from promptui.cli import app, options
from promptui.themes import load_themes

ROOT = Path(__file__).resolve().parents[2]
DEMO_FILES = {"looper.agent", "changelog.agent", "promptui_demo_tools.py",
              "promptui_demo_mcp.py", "scripts"}
THEMES = {"promptui-dark.toml", "promptui-light.toml", "promptui-terminal.toml",
          "promptui-contrast.toml"}


def fake_install(site: Path, *, data: bool, checkout: bool = False) -> Path:
    """A promptui package folder under ``site``: with the bundled folders a wheel carries
    (``data``), and with a ``pyproject.toml`` beside it (``checkout``). Either way, stray
    ``demo_manifests/`` and ``themes/`` folders sit beside the package."""
    package = site / "promptui"
    package.mkdir(parents=True)
    for name in ("demo_manifests", "themes"):
        (site / name).mkdir()
        if data:
            (package / "_bundled" / name).mkdir(parents=True)
    if checkout:
        (site / "pyproject.toml").write_text("[project]\n", encoding="utf-8")
    return package


def test_in_this_checkout_the_top_level_folders_are_found() -> None:
    assert demo_manifests_dir() == ROOT / "demo_manifests"
    assert themes_dir() == ROOT / "themes"
    assert {path.name for path in demo_manifests_dir().iterdir()} >= DEMO_FILES
    assert {path.name for path in themes_dir().iterdir()} >= THEMES


def test_the_folders_are_found_from_the_package_not_the_current_folder(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    assert demo_manifests_dir().is_absolute()
    assert demo_manifests_dir() == Path(promptui.__file__).resolve().parents[1] / "demo_manifests"


def test_an_installed_package_uses_the_folders_it_carries(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    package = fake_install(tmp_path / "site-packages", data=True)
    monkeypatch.setattr(bundled, "files", lambda name: package)
    assert demo_manifests_dir() == package / "_bundled" / "demo_manifests"
    assert themes_dir() == package / "_bundled" / "themes"


def test_the_packaged_folders_win_over_a_checkout(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    package = fake_install(tmp_path / "checkout", data=True, checkout=True)
    monkeypatch.setattr(bundled, "files", lambda name: package)
    assert themes_dir() == package / "_bundled" / "themes"


def test_an_install_without_them_never_takes_a_stray_folder_beside_it(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    package = fake_install(tmp_path / "site-packages", data=False)
    monkeypatch.setattr(bundled, "files", lambda name: package)
    # site-packages/themes is some other distribution's folder, not ours
    assert themes_dir() == package / "_bundled" / "themes"
    assert not themes_dir().exists()


def test_the_missing_message_says_where_and_what_to_do(tmp_path: Path) -> None:
    message = missing_message("the bundled demo", tmp_path / "gone")
    assert str(tmp_path / "gone") in message
    assert "pip install --force-reinstall promptui" in message
    assert "pip install -e ." in message


def test_a_missing_demo_is_one_error_line_with_the_fix(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(options, "BUNDLED_DEMO", tmp_path / "gone")
    result = CliRunner().invoke(app, ["run", "--seconds", "1"])
    assert result.exit_code == 2
    assert "the bundled demo is missing from this promptui install" in result.stderr
    assert str(tmp_path / "gone") in result.stderr.replace("\n", "")
    assert "Traceback" not in result.output


def test_missing_bundled_themes_are_a_warning_with_the_fix(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("promptui.themes.BUNDLED_THEMES_DIR", tmp_path / "gone")
    themes, warnings = load_themes(tmp_path / "no-user-themes")
    assert themes == []
    assert warnings == [missing_message("the bundled themes folder", tmp_path / "gone")]


def test_locate_themes_warns_when_the_bundled_folder_is_missing(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(bundled, "files", lambda name: fake_install(tmp_path, data=False))
    result = CliRunner().invoke(app, ["locate", "themes"],
                                env={"XDG_CONFIG_HOME": str(tmp_path / "config")})
    assert result.exit_code == 0
    assert result.stdout.splitlines()[1] == f"bundled: {tmp_path / 'promptui/_bundled/themes'}"
    assert "warning: the bundled themes folder is missing" in result.stderr


def test_python_dash_m_promptui_is_the_command(monkeypatch: pytest.MonkeyPatch,
                                               capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setattr(sys, "argv", ["promptui", "--version"])
    with pytest.raises(SystemExit) as exited:
        runpy.run_module("promptui", run_name="__main__")
    assert exited.value.code in (0, None)
    assert capsys.readouterr().out.strip() == f"promptui {promptui.__version__}"
