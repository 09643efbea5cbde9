"""A PostgreSQL DSN as it may be shown: never its password.

A DSN is a URI (``postgresql://user:secret@host/db?password=...``) or keywords
(``host=... password=secret``); either form may carry a password, and libpq's own messages
can echo a piece of a DSN it could not parse. Everything the journal says about where it
writes (logs, errors, its fault reason) goes through ``redact_dsn`` or ``Scrubber``;
``describe_dsn`` says where a DSN points in a few words (``user@host:port/dbname``), for the
command line's messages. ``sslpassword`` (a client key's passphrase) is hidden as a password.
"""

from __future__ import annotations

import os
import re
from urllib.parse import quote, unquote

from runtime_core.journal.provider import JournalError

HIDDEN = "***"
_URI_PASSWORD = re.compile(r"^(?P<head>[a-z][a-z0-9+.-]*://[^/@?#]*?:)(?P<pw>[^@/?#]*)@",
                           re.IGNORECASE)
_QUERY_PASSWORD = re.compile(r"(?P<head>[?&](?:ssl)?password=)(?P<pw>[^&#]*)", re.IGNORECASE)
# keyword form: password=value, password = 'quoted \' value' (and sslpassword alike)
_KEYWORD_PASSWORD = re.compile(
    r"(?P<head>\b(?:ssl)?password\s*=\s*)(?P<pw>'(?:[^'\\]|\\.)*'|\S+)", re.IGNORECASE)
#: a search_path set in the DSN's options (``-c search_path=s2`` or ``-csearch_path=s2``)
_SEARCH_PATH = re.compile(r"-c\s*search_path\s*=\s*(?P<path>[^\s]+)", re.IGNORECASE)


def redact_dsn(dsn: str) -> str:
    """``dsn`` with every password replaced by ``***`` (the rest kept: it says where)."""
    text = _URI_PASSWORD.sub(lambda m: m["head"] + HIDDEN + "@", dsn)
    text = _QUERY_PASSWORD.sub(lambda m: m["head"] + HIDDEN, text)
    if "://" not in text:
        text = _KEYWORD_PASSWORD.sub(lambda m: m["head"] + HIDDEN, text)
    return text


def describe_dsn(dsn: str) -> str:
    """Where ``dsn`` points, in an operator's words: ``user@host:port/dbname``, with
    ``(schema S)`` when its options set a search_path. What it leaves out is libpq's default
    (PGUSER, PGHOST, PGPORT, PGDATABASE; else the OS user, the local socket, 5432, the user).
    Only those parts are read, so no password can be in it; a DSN libpq cannot parse is
    shown as ``redact_dsn`` shows it."""
    import psycopg  # here: what hides a password (the room's redaction too) needs no driver
    from psycopg.conninfo import conninfo_to_dict

    try:
        params = conninfo_to_dict(dsn)
    except psycopg.Error:
        return redact_dsn(dsn)
    user = params.get("user") or os.environ.get("PGUSER") or _os_user()
    host = (params.get("host") or params.get("hostaddr") or os.environ.get("PGHOST")
            or "local socket")
    port = params.get("port") or os.environ.get("PGPORT") or "5432"
    dbname = params.get("dbname") or os.environ.get("PGDATABASE") or user
    where = f"{user}@{host}:{port}/{dbname}"
    if params.get("service") and not params.get("host"):
        where += f" (service {params['service']})"
    found = _SEARCH_PATH.search(str(params.get("options") or ""))
    if found:
        where += f" (schema {found['path']})"
    return where


def _os_user() -> str:
    import getpass  # here: only a DSN without a user needs it (and a start imports less)

    try:
        return getpass.getuser()
    except (KeyError, OSError):  # no name for this uid (a container)
        return str(os.getuid())


def dsn_secrets(dsn: str) -> list[str]:
    """Every spelling of the passwords in ``dsn`` (as written, decoded, encoded, unquoted)."""
    found: list[str] = []
    for pattern in (_URI_PASSWORD, _QUERY_PASSWORD, _KEYWORD_PASSWORD):
        for match in pattern.finditer(dsn):
            raw = match["pw"]
            found.append(raw)
            if raw.startswith("'") and raw.endswith("'") and len(raw) >= 2:
                raw = raw[1:-1].replace("\\'", "'").replace("\\\\", "\\")
            found.extend([raw, unquote(raw), quote(raw, safe="")])
    # longest first: a password that contains another's spelling is hidden whole
    return sorted({s for s in found if s and s != HIDDEN}, key=len, reverse=True)


class Scrubber:
    """Hides a DSN's passwords in any text (an exception's message, a log line)."""

    def __init__(self, dsn: str) -> None:
        self.secrets = dsn_secrets(dsn)
        self.shown = redact_dsn(dsn)

    def __call__(self, text: str) -> str:
        for secret in self.secrets:
            if secret in text:
                text = text.replace(secret, HIDDEN)
        return text

    def leaks(self, text: str) -> bool:
        return any(secret in text for secret in self.secrets)


def scrubbed_error(message: str, exc: BaseException, scrub: Scrubber) -> JournalError:
    """A JournalError for ``exc`` with the DSN's passwords hidden; ``exc`` is its cause only
    when it shows none. Raise it outside the except block, so the original is not its
    implicit context either."""
    text = scrub(str(exc).strip() or type(exc).__name__)
    error = JournalError(f"{message}: {text}")
    if not scrub.leaks(repr(exc)):
        error.__cause__ = exc
    return error
