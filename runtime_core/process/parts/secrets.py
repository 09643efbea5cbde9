"""Secret scoping as a part: resolved each start, revoked on stop (unless told not to) and on
close; every value is redacted from the journal, the prompts and the screens (core.secrets)."""

from __future__ import annotations

from runtime_core.governance.secrets import SecretScope
from runtime_core.process.core import Part, PartStatus, ProcessCore


class SecretsPart(Part):
    key = "secrets"

    def __init__(self, core: ProcessCore) -> None:
        self.core = core
        self.scope = SecretScope(core.config.secrets, core.clock, on_access=self._on_access)
        core.secrets = self.scope

    def _on_access(self, name: str) -> None:
        if self.core.recorder is not None:  # the name, never the value
            self.core.recorder.secret_access(name)

    def report(self, into: PartStatus) -> None:
        into.active_secrets = self.scope.active_count

    async def start(self) -> None:
        self.scope.resolve()  # a missing variable fails the start, loudly

    def stopped(self) -> None:
        if self.core.config.secrets.revoke_on_stop:
            self.scope.revoke_all()

    async def close(self) -> None:
        self.scope.revoke_all()
