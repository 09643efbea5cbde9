"""Secrets kept out of log lines. A tool (or any library) may log a secret's value; the lines
that reach our handlers (``promptui serve``'s stderr, ``promptui run``'s console, the room's
``.promptui/promptui.log``) are redacted as the journal and the screens are: each value a
process's secret scope holds becomes ``[secret:name]``, and each value the manifests declare
(read from the environment now, before any process resolves it) ``[redacted]``.

The redaction wraps the handler's formatter, so the whole formatted line is covered (message,
arguments, traceback, stack) and the record itself is left alone for anyone else's handlers.
A line that cannot be formatted (arguments that do not fit the message) is redacted too,
instead of being dumped raw by logging's error report."""

from __future__ import annotations

import logging
import os
from collections.abc import Callable, Iterable
from typing import Protocol

from runtime_core.config import ProcessConfig
from runtime_core.governance.redaction import literal_redactor
from runtime_core.governance.secrets import ENV_REF

#: What a line says instead when redacting it failed: better no line than a secret.
WITHHELD = "[log line withheld: it could not be checked for secrets]"


class HoldsSecrets(Protocol):
    """A process as this module sees it: its config and its own redaction."""

    @property
    def config(self) -> ProcessConfig:
        """The process's config; its ``secrets`` scope declares the values to hide."""
        ...

    def redact(self, text: str) -> str:
        """``text`` with every secret value the process resolved hidden."""
        ...


def declared_values(configs: Iterable[ProcessConfig]) -> set[str]:
    """Every secret value the configs' ``secrets`` scopes declare, as it reads now (a
    ``${VAR}`` that is not set adds nothing: the start will say so)."""
    values: set[str] = set()
    for config in configs:
        for spec in config.secrets.secrets.values():
            value = ENV_REF.sub(lambda m: os.environ.get(m.group(1), ""), spec)
            if value.strip():
                values.add(value)
    return values


class SecretRedactor:
    """Hides the secrets of the processes ``processes`` returns (read at each line, so a process
    added later counts) and the ``declared`` values, in any text."""

    def __init__(self, processes: Callable[[], Iterable[HoldsSecrets]],
                 declared: Iterable[str] = ()) -> None:
        self.processes = processes
        self._literal = literal_redactor(declared)

    def __call__(self, text: str) -> str:
        """``text`` without the secrets: ``[secret:name]`` (scopes), ``[redacted]`` (declared)."""
        for process in list(self.processes()):
            text = process.redact(text)
        return self._literal(text) if self._literal is not None else text


class RedactingFormatter(logging.Formatter):
    """A handler's formatter with every line it produces passed through ``redact``."""

    def __init__(self, inner: logging.Formatter | None, redact: Callable[[str], str]) -> None:
        self.inner = inner if inner is not None else logging.Formatter()
        super().__init__(self.inner._fmt, self.inner.datefmt)
        self.redact = redact

    def format(self, record: logging.LogRecord) -> str:
        """The inner formatter's line, redacted; a record whose arguments do not fit its message
        is shown as its message and arguments, redacted (logging would dump them raw). The
        message and the traceback are redacted before the inner formatter sees them too (a
        copy of the record: others' handlers get it as it was), so a format that escapes them
        (JSON) cannot hide a secret from the line's own redaction."""
        try:
            line = self.inner.format(self._redacted_record(record))
        except Exception:
            line = (f"{record.levelname} {record.name}: {record.msg!r} {record.args!r} (the "
                    "log call's arguments do not fit its message)")
        return self._redacted(line)

    def formatMessage(self, record: logging.LogRecord) -> str:
        """As :meth:`format`, for handlers (rich's) that format the message alone."""
        return self._redacted(self.inner.formatMessage(record))

    def usesTime(self) -> bool:
        """Whether the inner format shows the time."""
        return self.inner.usesTime()

    def formatTime(self, record: logging.LogRecord,
                   datefmt: str | None = None) -> str:
        """The inner formatter's time."""
        return self.inner.formatTime(record, datefmt)

    def _redacted_record(self, record: logging.LogRecord) -> logging.LogRecord:
        shown = logging.makeLogRecord(record.__dict__)
        shown.msg, shown.args = self._redacted(record.getMessage()), None
        if record.exc_info:
            shown.exc_text = self._redacted(self.inner.formatException(record.exc_info))
        elif record.exc_text:
            shown.exc_text = self._redacted(record.exc_text)
        shown.exc_info = None
        if record.stack_info:
            shown.stack_info = self._redacted(record.stack_info)
        return shown

    def _redacted(self, line: str) -> str:
        try:
            return self.redact(line)
        except Exception:  # a scope changing under us: retry once, else say nothing
            try:
                return self.redact(line)
            except Exception:
                return WITHHELD


def redact_handler(handler: logging.Handler,
                   processes: Callable[[], Iterable[HoldsSecrets]]) -> None:
    """Make ``handler`` hide the secrets of ``processes`` (see :class:`SecretRedactor`) and
    the values their configs declare, in every line it writes. Once is enough: a second call
    replaces the first."""
    current = handler.formatter
    if isinstance(current, RedactingFormatter):
        current = current.inner
    declared = declared_values(process.config for process in processes())
    handler.setFormatter(RedactingFormatter(current, SecretRedactor(processes, declared)))
