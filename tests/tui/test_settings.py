"""The user config file: where it is looked for, what it accepts, and how it complains."""

from __future__ import annotations

from pathlib import Path

import pytest

from promptui.settings import (
    Settings,
    SettingsError,
    config_dir,
    config_path,
    default_journal_path,
    load_settings,
    user_themes_dir,
)

FULL = """\
theme = "promptui-light"
refresh_hz = 4
mouse = false
read_only = true
low_bandwidth = true

[keymap]
"promptui.quit" = "q,ctrl+q"
"promptui.help" = "f1"
"""


@pytest.fixture(autouse=True)
def clean_env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    # Never read the developer's real config; each test sets what it needs.
    monkeypatch.delenv("PROMPTUI_CONFIG", raising=False)
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "xdg"))


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "config.toml"
    path.write_text(text, encoding="utf-8")
    return path


def test_missing_file_gives_defaults(tmp_path: Path) -> None:
    settings = load_settings(tmp_path / "nope.toml")
    assert settings == Settings()
    assert (settings.theme, settings.refresh_hz, settings.mouse) == ("promptui-dark", 10.0, True)
    assert (settings.read_only, settings.low_bandwidth, settings.keymap) == (False, False, {})
    assert load_settings() == Settings()  # default location, nothing there


def test_full_file_is_parsed(tmp_path: Path) -> None:
    settings = load_settings(write(tmp_path, FULL))
    assert settings.theme == "promptui-light"
    assert settings.refresh_hz == 4.0
    assert settings.mouse is False
    assert settings.read_only is True
    assert settings.low_bandwidth is True
    assert settings.keymap == {"promptui.quit": "q,ctrl+q", "promptui.help": "f1"}


def test_xdg_config_home_is_respected(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path))
    assert config_dir() == tmp_path / "promptui"
    assert config_path() == tmp_path / "promptui" / "config.toml"
    assert user_themes_dir() == tmp_path / "promptui" / "themes"
    config_path().parent.mkdir()
    config_path().write_text("mouse = false\n", encoding="utf-8")
    assert load_settings().mouse is False


def test_without_xdg_falls_back_to_dot_config(monkeypatch: pytest.MonkeyPatch,
                                              tmp_path: Path) -> None:
    monkeypatch.delenv("XDG_CONFIG_HOME")
    monkeypatch.setenv("HOME", str(tmp_path))
    assert config_path() == tmp_path / ".config" / "promptui" / "config.toml"


def test_promptui_config_overrides_the_whole_path(monkeypatch: pytest.MonkeyPatch,
                                                  tmp_path: Path) -> None:
    custom = write(tmp_path, "refresh_hz = 30\n")
    monkeypatch.setenv("PROMPTUI_CONFIG", str(custom))
    assert config_path() == custom
    assert load_settings().refresh_hz == 30.0
    assert user_themes_dir() == tmp_path / "xdg" / "promptui" / "themes"  # not moved


def test_default_journal_is_under_the_cwd(monkeypatch: pytest.MonkeyPatch,
                                          tmp_path: Path) -> None:
    monkeypatch.chdir(tmp_path)
    assert default_journal_path() == (tmp_path / ".promptui" / "journal.db").resolve()
    assert default_journal_path().is_absolute()


def test_bad_toml_reports_the_line(tmp_path: Path) -> None:
    path = write(tmp_path, 'theme = "promptui-dark"\nmouse = = true\n')
    with pytest.raises(SettingsError) as caught:
        load_settings(path)
    message = str(caught.value)
    assert str(path) in message
    assert "invalid TOML" in message
    assert "line 2" in message
    assert caught.value.line == 2


def test_unknown_key_is_named(tmp_path: Path) -> None:
    path = write(tmp_path, "mouse = true\nrefesh_hz = 5\n")
    with pytest.raises(SettingsError) as caught:
        load_settings(path)
    message = str(caught.value)
    assert f"{path}:2: refesh_hz: unknown setting" in message
    assert "refresh_hz" in message  # the valid names are listed, so the typo is easy to spot
    assert caught.value.field == "refesh_hz"


@pytest.mark.parametrize("value", ["0.5", "31", "100"])
def test_refresh_hz_out_of_range_names_the_field(tmp_path: Path, value: str) -> None:
    path = write(tmp_path, f"# comment\nrefresh_hz = {value}\n")
    with pytest.raises(SettingsError) as caught:
        load_settings(path)
    message = str(caught.value)
    assert f"{path}:2: refresh_hz: Input should be" in message
    assert message.endswith("(fix the value or delete the line)")
    assert caught.value.field == "refresh_hz"


def test_home_is_shown_as_tilde(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.delenv("XDG_CONFIG_HOME")
    config_path().parent.mkdir(parents=True)
    config_path().write_text("refresh_hz = 31\n", encoding="utf-8")
    with pytest.raises(SettingsError, match=r"^~/\.config/promptui/config\.toml:1: refresh_hz: "
                       r"Input should be less than or equal to 30 \(fix the value"):
        load_settings()


def test_wrong_types_are_not_coerced(tmp_path: Path) -> None:
    with pytest.raises(SettingsError, match="mouse"):
        load_settings(write(tmp_path, 'mouse = "no"\n'))
    with pytest.raises(SettingsError, match=r":3: keymap\.promptui\.quit"):
        load_settings(write(tmp_path, '[keymap]\n"promptui.help" = "f1"\n"promptui.quit" = 1\n'))
