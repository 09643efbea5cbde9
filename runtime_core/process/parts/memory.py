"""Long-term memory as a part: the provider opens with the first start and stays open across
stop and start, its tools join the agent's, and with ``auto_inject`` each run's prompt gets the
best matches for its event. close() closes it; the next start opens a new one."""

from __future__ import annotations

from runtime_core.agent.tools import AgentTool
from runtime_core.memory.factory import memory_status, open_memory
from runtime_core.memory.inject import MemoryInjector
from runtime_core.memory.provider import MemoryProvider
from runtime_core.memory.tools import memory_tools
from runtime_core.process.core import Part, PartStatus, ProcessCore


class MemoryPart(Part):
    key = "memory"

    def __init__(self, core: ProcessCore) -> None:
        self.core = core
        self.provider: MemoryProvider | None = None

    def report(self, into: PartStatus) -> None:
        into.memory = memory_status(self.core.config.memory, self.provider)

    async def start(self) -> None:
        config = self.core.config.memory
        journal = self.core.journal
        from runtime_core.journal.sqlite.journal import SQLiteJournal  # loaded with the journal

        journal_file = journal.path if isinstance(journal, SQLiteJournal) else None
        self.provider = await open_memory(self.provider, config, self.core.name, journal_file)
        self.core.memory_block = MemoryInjector(self.provider, config) \
            if self.provider is not None and config.auto_inject else None

    def tools(self, taken: set[str]) -> dict[str, AgentTool]:
        if self.provider is None or not self.core.config.memory.tools:
            return {}
        return dict(memory_tools(self.provider, taken=taken))

    async def close(self) -> None:
        if self.provider is not None:
            await self.provider.close()
