"""The user's config file: where it lives (XDG style) and how it is read and checked."""

from __future__ import annotations

import json
import os
import re
import tomllib
from pathlib import Path
from typing import Literal

import pydantic
from pydantic import BaseModel, ConfigDict, Field

APP_DIR_NAME = "promptui"
CONFIG_FILE_NAME = "config.toml"
JOURNAL_RELATIVE = Path(".promptui/journal.db")


class SettingsError(ValueError):
    """The config file cannot be used; the message says where, what and how to fix it."""

    def __init__(self, message: str, *, path: Path | None = None, line: int | None = None,
                 field: str | None = None) -> None:
        super().__init__(message)
        self.path = path
        self.line = line
        self.field = field


class Settings(BaseModel):
    # Strict so a TOML string like mouse = "no" fails instead of being coerced to True;
    # forbid extras so a typo'd key is reported rather than silently ignored.
    model_config = ConfigDict(extra="forbid", strict=True)

    theme: str = "promptui-dark"
    refresh_hz: float = Field(default=10.0, ge=1, le=30)
    mouse: bool = True
    read_only: bool = False
    low_bandwidth: bool = False
    keymap: dict[str, str] = Field(default_factory=dict)
    """Binding id -> comma-separated keys, e.g. {"promptui.quit": "q,ctrl+q"}."""
    bell: bool = True
    """Ring the terminal bell on a new anomaly or a new waiting run (at most every 5 s)."""
    time_format: Literal["iso", "relative"] = "iso"
    """How the room shows times: local date and time, or "3 min ago" (the room's `a` key
    toggles it and writes the choice back here)."""


def config_dir() -> Path:
    # The XDG spec says to ignore an empty or relative XDG_CONFIG_HOME.
    xdg = os.environ.get("XDG_CONFIG_HOME", "")
    base = Path(xdg) if xdg and Path(xdg).is_absolute() else Path.home() / ".config"
    return base / APP_DIR_NAME


def config_path() -> Path:
    override = os.environ.get("PROMPTUI_CONFIG", "")
    if override:
        return Path(override).expanduser()
    return config_dir() / CONFIG_FILE_NAME


def user_themes_dir() -> Path:
    return config_dir() / "themes"


def default_journal_path() -> Path:
    return JOURNAL_RELATIVE.resolve()


def display_path(path: Path) -> str:
    """``path`` with the home folder shown as ``~``, as users see it in docs and shells."""
    try:
        return "~/" + path.relative_to(Path.home()).as_posix()
    except ValueError:
        return str(path)


def load_settings(path: Path | None = None) -> Settings:
    """Read the config file; a missing file means all defaults."""
    path = config_path() if path is None else path
    shown = display_path(path)
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        return Settings()
    except OSError as exc:
        raise SettingsError(f"{shown}: cannot read the file: {exc.strerror or exc}",
                            path=path) from exc
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise SettingsError(f"{shown}: the file is not UTF-8 text (save it as UTF-8)",
                            path=path) from exc
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        # Python 3.11's error carries the position only in its message: "(at line 3, column 5)".
        found = re.search(r"line (\d+)", str(exc))
        raise SettingsError(f"{shown}: invalid TOML: {exc} (fix the syntax on that line)",
                            path=path, line=int(found.group(1)) if found else None) from exc
    try:
        return Settings.model_validate(data)
    except pydantic.ValidationError as exc:
        raise _explain(exc, path, shown, text) from exc


def _explain(exc: pydantic.ValidationError, path: Path, shown: str, text: str) -> SettingsError:
    """Turn pydantic's first complaint into one line that names the file, line and field."""
    error = exc.errors()[0]
    loc = [str(part) for part in error["loc"]]
    field = ".".join(loc) or "(top level)"
    line = _find_line(text, loc)
    where = f"{shown}:{line}" if line is not None else shown
    if error["type"] == "extra_forbidden":
        valid = ", ".join(Settings.model_fields)
        message = (f"{where}: {field}: unknown setting (valid settings: {valid}; "
                   "check the spelling or delete the line)")
    else:
        message = f"{where}: {field}: {error['msg']} (fix the value or delete the line)"
    if len(exc.errors()) > 1:
        message += f" [and {len(exc.errors()) - 1} more problem(s)]"
    return SettingsError(message, path=path, line=line, field=field)


def save_setting(key: str, value: str, path: Path | None = None) -> None:
    """Write one top-level string setting into the config file, the rest of the file (comments
    and all) kept: its line is replaced, or the setting goes first (top-level keys must come
    before any ``[table]``). Raises OSError when the file cannot be written."""
    if key not in Settings.model_fields:
        raise KeyError(key)
    path = config_path() if path is None else path
    try:
        lines = path.read_text(encoding="utf-8").splitlines(keepends=True)
    except FileNotFoundError:
        lines = []
    entry = f"{key} = {json.dumps(value)}\n"  # a JSON string is a valid TOML basic string
    pattern = re.compile(r"^\s*" + re.escape(key) + r"\s*=")
    found = False
    for index, line in enumerate(lines):
        if _TABLE.match(line):
            break
        if pattern.match(line):
            lines[index], found = entry, True
            break
    if not found:
        lines.insert(0, entry)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(lines), encoding="utf-8")


def find_key_line(path: Path, *loc: str) -> int | None:
    """Best-effort 1-based line of ``table.key`` (or a top-level key) in the file at ``path``,
    for a message about a value that parsed but is not usable."""
    try:
        return _find_line(path.read_text(encoding="utf-8"), list(loc))
    except (OSError, UnicodeDecodeError):
        return None


_TABLE = re.compile(r"^\s*\[\s*([^\]]+?)\s*\]")


def _find_line(text: str, loc: list[str]) -> int | None:
    """Best-effort 1-based line of a key: a top-level key, or ``table.key`` inside ``[table]``."""
    if not loc:
        return None
    table, key = ("", loc[0]) if len(loc) == 1 else (loc[0], loc[1])
    key_pattern = re.compile(
        r"^\s*(?:" + re.escape(key) + r"|\"" + re.escape(key) + r"\"|'" + re.escape(key)
        + r"')\s*="
    )
    current = ""
    fallback: int | None = None
    for number, line in enumerate(text.splitlines(), start=1):
        header = _TABLE.match(line)
        if header:
            current = header.group(1).strip("\"'")
            if table and current == table:
                fallback = number  # at least point at the table if the key is not found
            continue
        if current == table and key_pattern.match(line):
            return number
    if table and fallback is None:
        # An inline table such as `keymap = {...}` sits on the top-level key's line.
        return _find_line(text, [table])
    return fallback

