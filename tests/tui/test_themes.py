"""Bundled and user colour themes: loading, overriding, and reporting broken files."""

from __future__ import annotations

from pathlib import Path

import pytest
from textual.app import App

from promptui.themes import (
    BUNDLED_THEMES_DIR,
    DEFAULT_THEME,
    LOW_BANDWIDTH_THEME,
    ThemeError,
    load_theme_file,
    load_themes,
)

BUNDLED = {"promptui-dark", "promptui-light", "promptui-terminal", "promptui-contrast"}
COLOURS = ("primary", "secondary", "accent", "foreground", "background", "surface", "panel",
           "success", "warning", "error")

USER_DARK = """\
name = "promptui-dark"
dark = true
primary = "#ff00ff"
background = "#101010"
"""


def test_bundled_themes_load_with_expected_names(tmp_path: Path) -> None:
    themes, warnings = load_themes(tmp_path / "no-user-themes")
    assert warnings == []
    names = [theme.name for theme in themes]
    assert set(names) == BUNDLED
    assert {DEFAULT_THEME, LOW_BANDWIDTH_THEME} <= set(names)
    by_name = {theme.name: theme for theme in themes}
    assert by_name["promptui-light"].dark is False
    assert by_name["promptui-dark"].dark is True
    for theme in themes:  # bundled themes spell out every colour rather than relying on defaults
        assert all(getattr(theme, field) for field in COLOURS), theme.name


def test_each_bundled_file_is_named_after_its_theme() -> None:
    for path in BUNDLED_THEMES_DIR.glob("*.toml"):
        assert load_theme_file(path).name == path.stem


def test_user_theme_overrides_bundled_by_name(tmp_path: Path) -> None:
    (tmp_path / "mine.toml").write_text(USER_DARK, encoding="utf-8")
    (tmp_path / "extra.toml").write_text('name = "extra"\nprimary = "red"\n', encoding="utf-8")
    themes, warnings = load_themes(tmp_path)
    assert warnings == []
    dark = [theme for theme in themes if theme.name == "promptui-dark"]
    assert len(dark) == 1
    assert dark[0].primary == "#ff00ff"
    assert dark[0].surface is None  # the user's file replaces the theme, it is not merged
    assert {theme.name for theme in themes} == BUNDLED | {"extra"}


def test_broken_user_theme_is_skipped_and_reported(tmp_path: Path) -> None:
    (tmp_path / "broken.toml").write_text('name = "broken"\nprimary = \n', encoding="utf-8")
    (tmp_path / "nameless.toml").write_text('primary = "#123456"\n', encoding="utf-8")
    (tmp_path / "good.toml").write_text('name = "good"\nprimary = "#123456"\n',
                                        encoding="utf-8")
    themes, warnings = load_themes(tmp_path)
    names = {theme.name for theme in themes}
    assert "good" in names
    assert "broken" not in names
    assert len(warnings) == 2
    assert any("broken.toml" in w and "invalid TOML" in w for w in warnings)
    assert any("nameless.toml" in w and "name: missing" in w for w in warnings)


def test_bad_colour_names_file_and_field(tmp_path: Path) -> None:
    path = tmp_path / "bad.toml"
    path.write_text('name = "bad"\nprimary = "#123456"\nwarning = "amberish"\n',
                    encoding="utf-8")
    with pytest.raises(ThemeError, match=r"bad\.toml: warning: 'amberish' is not a colour"):
        load_theme_file(path)


@pytest.mark.parametrize(("body", "field"), [
    ('name = "x"\nprimary = "#123456"\nbackgound = "#000000"\n', "backgound: unknown field"),
    ('name = "x"\nprimary = "#123456"\ndark = "yes"\n', "dark: should be true or false"),
    ('name = "x"\nprimary = 5\n', "primary: should be a colour string"),
    ('name = "x"\nprimary = "#123456"\n[variables]\nborder = 1\n', "variables.border"),
])
def test_other_bad_fields_are_named(tmp_path: Path, body: str, field: str) -> None:
    path = tmp_path / "t.toml"
    path.write_text(body, encoding="utf-8")
    with pytest.raises(ThemeError, match=f"t.toml: {field}"):
        load_theme_file(path)


async def test_bundled_themes_register_on_a_textual_app(tmp_path: Path) -> None:
    themes, _ = load_themes(tmp_path / "none")
    app: App[None] = App()
    async with app.run_test():
        for theme in themes:
            app.register_theme(theme)
            app.theme = theme.name  # applying builds the full colour system from the theme
            assert app.current_theme.name == theme.name
            assert app.get_css_variables()["background"]
