"""Which served runtime a command talks to: ``--url``, else ``PROMPTUI_URL``, else the
``.promptui/serve.json`` that ``promptui serve`` leaves in its folder while it runs. The token:
``--token``, else ``PROMPTUI_TOKEN``, else the token file that server named."""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path

URL_ENV = "PROMPTUI_URL"
TOKEN_ENV = "PROMPTUI_TOKEN"
DISCOVERY_FILE = Path(".promptui") / "serve.json"
DEFAULT_TOKEN_FILE = Path(".promptui") / "token"


class TargetError(ValueError):
    pass


@dataclass(frozen=True, slots=True)
class ServerTarget:
    url: str
    token: str
    found_by: str  # "--url", "PROMPTUI_URL" or the discovery file


def _pid_alive(pid: object) -> bool:
    if not isinstance(pid, int) or pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _discovered() -> dict[str, object] | None:
    try:
        data = json.loads(DISCOVERY_FILE.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    if not isinstance(data, dict) or not isinstance(data.get("url"), str):
        return None
    return data if _pid_alive(data.get("pid")) else None


def _read_token(path: Path) -> str:
    try:
        return path.read_text(encoding="utf-8").strip()
    except OSError as exc:
        raise TargetError(f"cannot read the token file {path}: {exc.strerror}; give --token "
                          f"or set {TOKEN_ENV}") from None


def find_server(url: str | None = None, token: str | None = None) -> ServerTarget | None:
    """The server to talk to, or None when none is named or running here."""
    found_by = "--url"
    discovered = None
    if not url:
        url, found_by = os.environ.get(URL_ENV, "").strip(), URL_ENV
    if not url:
        discovered = _discovered()
        if discovered is None:
            return None
        url, found_by = str(discovered["url"]), str(DISCOVERY_FILE)
    token = (token or os.environ.get(TOKEN_ENV, "")).strip()
    if not token:
        named = discovered.get("token_file") if discovered is not None else None
        if isinstance(named, str) and named:
            token = _read_token(Path(named))
        elif DEFAULT_TOKEN_FILE.exists():
            token = _read_token(DEFAULT_TOKEN_FILE)
    return ServerTarget(url.rstrip("/"), token, found_by)
