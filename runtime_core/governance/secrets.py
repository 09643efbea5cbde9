"""Secret scoping: values resolved at start, handed to tools on request, revoked on stop, and
never written anywhere: any occurrence in text is replaced by ``[secret:name]`` first, and so
is the start of one that a text cut short ends with."""

from __future__ import annotations

import os
import re
from collections.abc import Callable
from typing import Any

from runtime_core.clock import Clock
from runtime_core.governance.config import SecretScopeConfig
from runtime_core.governance.redaction import hide_value

ENV_REF = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)\}")


class SecretError(RuntimeError):
    pass


class SecretScope:
    def __init__(self, config: SecretScopeConfig, clock: Clock,
                 on_access: Callable[[str], None] | None = None) -> None:
        self.config = config
        self.clock = clock
        self.on_access = on_access
        self._values: dict[str, tuple[str, float | None]] = {}
        self._seen: dict[str, str] = {}  # value -> name, kept after revocation for redaction

    def resolve(self) -> None:
        """Resolve every secret now; a missing environment variable fails the start."""
        values: dict[str, tuple[str, float | None]] = {}
        for name, spec in self.config.secrets.items():
            def lookup(match: re.Match[str], secret: str = name) -> str:
                var = match.group(1)
                if var not in os.environ:
                    raise SecretError(f"secret {secret!r} needs environment variable {var}, "
                                      "which is not set")
                return os.environ[var]
            value = ENV_REF.sub(lookup, spec)
            ttl = self.config.ttls.get(name, self.config.default_ttl)
            expires = self.clock.monotonic() + ttl if ttl else None
            values[name] = (value, expires)
            if value:
                self._seen[value] = name
        self._values = values

    def get(self, name: str, *, notify: bool = True) -> str:
        if name not in self._values:
            known = ", ".join(sorted(self._values)) or "none"
            raise KeyError(f"no active secret {name!r} (active: {known})")
        value, expires = self._values[name]
        if expires is not None and self.clock.monotonic() >= expires:
            del self._values[name]
            raise KeyError(f"secret {name!r} has expired")
        if notify and self.on_access is not None:
            self.on_access(name)
        return value

    def notify_access(self, name: str) -> None:
        if self.on_access is not None:
            self.on_access(name)

    def revoke_all(self) -> None:
        self._values.clear()

    @property
    def active_count(self) -> int:
        now = self.clock.monotonic()
        return sum(1 for _, exp in self._values.values() if exp is None or exp > now)

    def redact(self, text: str) -> str:
        if not self._seen or not text:
            return text
        for value in sorted(self._seen, key=len, reverse=True):  # longest first
            text = hide_value(text, value, f"[secret:{self._seen[value]}]")
        return text

    def redact_any(self, value: Any) -> Any:
        """Redact every string inside a JSON-like value."""
        if not self._seen:
            return value
        if isinstance(value, str):
            return self.redact(value)
        if isinstance(value, dict):
            return {k: self.redact_any(v) for k, v in value.items()}
        if isinstance(value, list):
            return [self.redact_any(v) for v in value]
        return value
