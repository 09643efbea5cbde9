"""The API's bearer token: ``PROMPTUI_TOKEN`` when set, else a file made at first start that
only its owner can read (0600), reused by later starts and by local clients."""

from __future__ import annotations

import os
import secrets
from pathlib import Path

TOKEN_ENV = "PROMPTUI_TOKEN"
MIN_LENGTH = 16


class TokenError(ValueError):
    pass


def check_token(token: str, where: str) -> str:
    token = token.strip()
    if len(token) < MIN_LENGTH or not token.isascii() or not token.isprintable() \
            or " " in token:
        raise TokenError(f"the token from {where} must be at least {MIN_LENGTH} printable "
                         "ASCII characters without spaces")
    return token


def load_or_create_token(path: Path) -> tuple[str, str]:
    """(token, where it came from)."""
    from_env = os.environ.get(TOKEN_ENV, "")
    if from_env.strip():
        return check_token(from_env, TOKEN_ENV), TOKEN_ENV
    if path.exists():
        mode = path.stat().st_mode & 0o777
        if mode & 0o077:
            raise TokenError(f"{path} is readable by others (mode {mode:o}); run "
                             f"'chmod 600 {path}' or delete it to make a new token")
        return check_token(path.read_text(encoding="utf-8"), str(path)), str(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    token = secrets.token_urlsafe(32)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as handle:
        handle.write(token + "\n")
    return token, str(path)
