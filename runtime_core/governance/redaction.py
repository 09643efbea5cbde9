"""What a configuration shows of its credentials: nothing. A value that may hold one (a header
named like a credential, a field named like a secret, a URL's password or token parameter) is
``[redacted]`` unless it is only ``${VAR}`` references, which name a variable and reveal
nothing. The values hidden are collected, so the same text can be hidden wherever else it
turns up. Pure functions over JSON-like data (a config's ``model_dump(mode="json")``)."""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable
from typing import Any
from urllib.parse import unquote, urlsplit, urlunsplit

REDACTED = "[redacted]"
REFERENCE = re.compile(r"\$\{[A-Za-z_][A-Za-z0-9_]*(?::-[^}]*)?\}")
#: Names of headers, fields and URL parameters whose values are credentials.
CREDENTIAL_NAME = re.compile(
    r"auth|api[-_]?key|access[-_]?key|private[-_]?key|cookie|token|secret|passw|credential"
    r"|session|signature|dsn", re.IGNORECASE)  # a DSN may carry password=... in clear
#: Field names that say something about a credential without holding it (``api_key_env``
#: names a variable, ``signature_scheme`` a scheme).
_DESCRIBES = re.compile(r"_(env|scheme|header|tolerance|ttl)$", re.IGNORECASE)
_AUTH_SCHEME = re.compile(r"^(bearer|basic|token|digest)\s+", re.IGNORECASE)
#: Shorter hidden values are not searched for in free text: they would hit ordinary words.
MIN_LITERAL = 8


def is_credential_name(name: str) -> bool:
    return bool(CREDENTIAL_NAME.search(name)) and not _DESCRIBES.search(name)


def is_reference(value: str) -> bool:
    """Only ``${VAR}`` references (after an auth scheme word: ``Bearer ${TOKEN}``)."""
    rest = _AUTH_SCHEME.sub("", value.strip())
    return bool(rest) and not REFERENCE.sub("", rest).strip()


def _hide(value: str, hidden: set[str]) -> str:
    """``value`` as shown where a credential may be: references stay, the rest is hidden."""
    if not value or value == REDACTED or is_reference(value):
        return value
    if value.strip("*"):  # a pydantic SecretStr dumps as stars: nothing to collect
        hidden.add(value)
        bare = _AUTH_SCHEME.sub("", value.strip())
        if bare != value:
            hidden.add(bare)  # "Bearer <token>": the token alone too
    return REDACTED


def mask_url(url: str, hidden: set[str]) -> str:
    """A URL with its password and credential-named query values hidden."""
    try:
        parts = urlsplit(url)
    except ValueError:
        return url
    if not parts.scheme or not parts.netloc:
        return url
    netloc = parts.netloc
    userinfo, at, host = netloc.rpartition("@")
    if at and ":" in userinfo:
        user, _, password = userinfo.partition(":")
        if password and not is_reference(unquote(password)):
            hidden.update({password, unquote(password)})
            netloc = f"{user}:{REDACTED}@{host}"
    query = []
    for pair in parts.query.split("&") if parts.query else []:
        name, eq, value = pair.partition("=")
        if eq and value and is_credential_name(unquote(name)):
            shown = _hide(unquote(value), hidden)
            if shown == REDACTED:
                hidden.add(value)  # as written in the URL (percent-encoded) too
                value = REDACTED
        query.append(f"{name}{eq}{value}")
    return urlunsplit((parts.scheme, netloc, parts.path, "&".join(query), parts.fragment))


def hide_credentials(data: Any, hidden: set[str], *, sensitive: bool = False) -> Any:
    """``data`` with every credential ``[redacted]`` (references kept); what was hidden is
    added to ``hidden``. Everything under a credential-named key (a field, a header, an
    environment variable: ``Authorization``, ``DB_PASSWORD``) is a credential."""
    if isinstance(data, dict):
        return {key: hide_credentials(value, hidden,
                                      sensitive=sensitive or is_credential_name(str(key)))
                for key, value in data.items()}
    if isinstance(data, list):
        return [hide_credentials(item, hidden, sensitive=sensitive) for item in data]
    if isinstance(data, str):
        if sensitive:
            return _hide(data, hidden)
        return mask_url(data, hidden) if "://" in data else data
    return data


def hide_value(text: str, value: str, shown: str) -> str:
    """``text`` with every ``value`` in it shown as ``shown``, and a start of ``value`` at its
    very end too (at least MIN_LITERAL characters): a preview cut short mid-secret."""
    if value in text:
        text = text.replace(value, shown)
    if len(value) > MIN_LITERAL and len(text) >= MIN_LITERAL:
        for start in range(max(0, len(text) - len(value) + 1), len(text) - MIN_LITERAL + 1):
            if value.startswith(text[start:]):
                return text[:start] + shown
    return text


def literal_redactor(hidden: Iterable[str]) -> Callable[[str], str] | None:
    """A function hiding each of ``hidden`` (long enough to be told from words) in free text,
    or None when there is nothing to hide."""
    values = sorted({v for v in hidden if len(v) >= MIN_LITERAL}, key=len, reverse=True)
    if not values:
        return None

    def redact(text: str) -> str:
        for value in values:  # longest first: a token inside its "Bearer <token>" header
            text = hide_value(text, value, REDACTED)
        return text

    return redact
