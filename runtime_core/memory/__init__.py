"""Long-term memory: a provider per process (in_memory or sqlite with FTS5), offered to the
agent as remember / recall / forget tools and optionally injected into each run's prompt.

It lives as long as the process object, not a run: stop() keeps it open, close() closes it and
the next start() opens a new one; a rewind never rolls it back. Names load on first use."""

import lazy_loader

__getattr__, __dir__, __all__ = lazy_loader.attach_stub(__name__, __file__)
