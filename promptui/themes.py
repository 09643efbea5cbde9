"""Colour themes: the bundled ones (``promptui.bundled.themes_dir``) plus the user's own TOML
files."""

from __future__ import annotations

import tomllib
from collections.abc import Callable
from pathlib import Path
from typing import Any

from textual.color import Color, ColorParseError
from textual.theme import Theme

from promptui.bundled import missing_message, themes_dir
from promptui.settings import display_path, user_themes_dir

#: The bundled themes' folder: in the installed package, or the checkout's themes/.
BUNDLED_THEMES_DIR = themes_dir()
DEFAULT_THEME = "promptui-dark"
LOW_BANDWIDTH_THEME = "promptui-terminal"

COLOUR_FIELDS = ("primary", "secondary", "accent", "foreground", "background", "surface",
                 "panel", "success", "warning", "error", "boost")
REQUIRED_FIELDS = ("name", "primary")  # what textual.theme.Theme itself cannot do without
KNOWN_FIELDS = frozenset({"name", "dark", "variables", *COLOUR_FIELDS})


class ThemeError(ValueError):
    """A theme file cannot be used; the message names the file and the bad field."""


def load_theme_file(path: Path) -> Theme:
    shown = display_path(path)
    try:
        data = tomllib.loads(path.read_bytes().decode("utf-8"))
    except OSError as exc:
        raise ThemeError(f"{shown}: cannot read the file: {exc.strerror or exc}") from exc
    except UnicodeDecodeError as exc:
        raise ThemeError(f"{shown}: the file is not UTF-8 text") from exc
    except tomllib.TOMLDecodeError as exc:
        raise ThemeError(f"{shown}: invalid TOML: {exc}") from exc
    return _build(data, shown)


def _build(data: dict[str, Any], shown: str) -> Theme:
    def fail(field: str, problem: str) -> ThemeError:
        return ThemeError(f"{shown}: {field}: {problem}")

    unknown = sorted(set(data) - KNOWN_FIELDS)
    if unknown:
        raise fail(unknown[0], "unknown field (valid fields: "
                   f"{', '.join(sorted(KNOWN_FIELDS))}; check the spelling)")
    for field in REQUIRED_FIELDS:
        if field not in data:
            raise fail(field, "missing (every theme needs a name and a primary colour)")
    name = data["name"]
    if not isinstance(name, str) or not name.strip():
        raise fail("name", "should be a non-empty string")
    dark = data.get("dark", True)
    if not isinstance(dark, bool):
        raise fail("dark", "should be true or false")
    colours: dict[str, str] = {}
    for field in COLOUR_FIELDS:
        if field in data:
            colours[field] = _colour(data[field], field, fail)
    variables = data.get("variables", {})
    if not isinstance(variables, dict):
        raise fail("variables", "should be a [variables] table of name = \"value\" pairs")
    for key, value in variables.items():
        # Variables may be non-colours ("reverse", "#81a1c1 35%"), so only the type is checked.
        if not isinstance(value, str):
            raise fail(f"variables.{key}", "should be a string")
    return Theme(
        name=name, dark=dark, variables=dict(variables), primary=colours["primary"],
        secondary=colours.get("secondary"), accent=colours.get("accent"),
        foreground=colours.get("foreground"), background=colours.get("background"),
        surface=colours.get("surface"), panel=colours.get("panel"), boost=colours.get("boost"),
        success=colours.get("success"), warning=colours.get("warning"),
        error=colours.get("error"),
    )


def _colour(value: object, field: str, fail: Callable[[str, str], ThemeError]) -> str:
    if not isinstance(value, str):
        raise fail(field, 'should be a colour string such as "#1e90ff"')
    try:
        Color.parse(value)
    except ColorParseError as exc:
        hint = exc.suggested_color
        fix = f'did you mean "{hint}"?' if hint else 'use e.g. "#1e90ff" or "dodgerblue"'
        raise fail(field, f"{value!r} is not a colour ({fix})") from exc
    return value


def load_themes(user_dir: Path | None = None) -> tuple[list[Theme], list[str]]:
    """Bundled themes then the user's (``user_dir`` None -> the XDG themes folder).

    A user theme with a bundled theme's name replaces it. Broken files are skipped and
    described in the returned warnings, so a bad theme never stops the app from starting.
    """
    user_dir = user_themes_dir() if user_dir is None else user_dir
    themes: dict[str, Theme] = {}
    warnings: list[str] = []
    if BUNDLED_THEMES_DIR.is_dir():
        _load_dir(BUNDLED_THEMES_DIR, themes, warnings, {})
    else:
        warnings.append(missing_message("the bundled themes folder", BUNDLED_THEMES_DIR))
    if user_dir.is_dir():
        _load_dir(user_dir, themes, warnings, {})
    elif user_dir.exists():
        warnings.append(f"{display_path(user_dir)}: not a folder, so no user themes were loaded")
    return list(themes.values()), warnings


def _load_dir(folder: Path, themes: dict[str, Theme], warnings: list[str],
              seen: dict[str, Path]) -> None:
    for path in sorted(folder.glob("*.toml")):
        try:
            theme = load_theme_file(path)
        except ThemeError as exc:
            warnings.append(f"{exc} (theme skipped)")
            continue
        if theme.name in seen:
            warnings.append(f"{display_path(path)}: theme {theme.name!r} is also defined in "
                            f"{display_path(seen[theme.name])}; using this file")
        seen[theme.name] = path
        themes[theme.name] = theme  # same name replaces in place, keeping the list order
