"""The Python API pages: ``reference/python.md`` (an index of ``runtime_core``'s public names
by area), one page per area under ``reference/python/``, and ``reference/python-journal.md``
(``runtime_core.journal``). mkdocstrings renders each name from its docstring and signature.
The names come from each package's ``__all__`` (its lazy stub), so a new public name appears
by itself, on the page of the part of the runtime it is defined in."""

from __future__ import annotations

import importlib
from types import ModuleType

from .markdown import anchor, banner, cell, code, table

#: Area page (slug, title) by the subpackage or module a name is defined in. A name from a
#: part not listed here lands on the "other" page.
AREAS: dict[str, tuple[str, str]] = {
    "process": ("processes", "Processes and the runtime"),
    "runtime": ("processes", "Processes and the runtime"),
    "config": ("processes", "Processes and the runtime"),
    "runtime_config": ("processes", "Processes and the runtime"),
    "lifecycle": ("processes", "Processes and the runtime"),
    "context": ("processes", "Processes and the runtime"),
    "errors": ("processes", "Processes and the runtime"),
    "manifest": ("manifests", "Manifests"),
    "triggers": ("triggers", "Triggers and delivery"),
    "delivery": ("triggers", "Triggers and delivery"),
    "runs": ("runs", "Runs"),
    "agent": ("models-and-tools", "Models and tools"),
    "governance": ("governance", "Governance, incidents and memory"),
    "incidents": ("governance", "Governance, incidents and memory"),
    "memory": ("governance", "Governance, incidents and memory"),
    "events": ("events-and-control", "Events, clocks and remote control"),
    "event_sinks": ("events-and-control", "Events, clocks and remote control"),
    "bus": ("events-and-control", "Events, clocks and remote control"),
    "clock": ("events-and-control", "Events, clocks and remote control"),
    "control": ("events-and-control", "Events, clocks and remote control"),
}
OTHER = ("other", "Other names")
JOURNAL_PAGE = "reference/python-journal.md"

INDEX_INTRO = """\
# runtime_core reference

`runtime_core` is the runtime behind the room, usable on its own: build an `AgentProcess`
(or several in an `AgentRuntime`), give it a model, tools and triggers, start it, and read
what it did from its journal. Every name below is importable from `runtime_core` itself, and
`import runtime_core` loads nothing until a name is used.

```python
import asyncio
from runtime_core import AgentProcess, ProcessConfig, TriggerConfig

async def main() -> None:
    process = AgentProcess("greeter", ProcessConfig(
        instructions="Greet whoever is named.",
        triggers=[TriggerConfig(type="interval", seconds=5)],
    ))
    await process.start()  # the offline 'echo' model answers each event
    await asyncio.sleep(12)
    print(process.status()["invocation_count"])
    await process.stop()

asyncio.run(main())
```

The settings (`ProcessConfig` and its parts) are listed field by field in the
[manifest reference](manifest.md).
"""

JOURNAL_INTRO = """\
# runtime_core.journal

The journal is the append-only record of everything a process does: the source of truth for
recovery, replay and rewind. SQLite is the embedded default, PostgreSQL the scale-out one.
Every name below is importable from `runtime_core.journal`.
"""


def public_names(package: str) -> list[str]:
    """``package.__all__``: what the pages document."""
    module: ModuleType = importlib.import_module(package)
    return list(module.__all__)


def _part(package: str, name: str) -> str:
    obj = getattr(importlib.import_module(package), name)
    return str(getattr(obj, "__module__", package)).removeprefix("runtime_core.").split(".")[0]


def _summary(package: str, name: str) -> str:
    doc = getattr(importlib.import_module(package), name).__doc__ or ""
    first = doc.strip().split("\n\n")[0]
    return cell(first.split(". ")[0].rstrip(".") + ".") if first else ""


def areas() -> dict[str, tuple[str, list[str]]]:
    """Area slug -> (title, the runtime_core names on its page), in page order; the names the
    journal's page documents are left out (the index links them there)."""
    journal = set(public_names("runtime_core.journal"))
    order = list(dict.fromkeys([*AREAS.values(), OTHER]))
    found: dict[str, tuple[str, list[str]]] = {}
    for name in public_names("runtime_core"):
        if name in journal:
            continue
        slug, title = AREAS.get(_part("runtime_core", name), OTHER)
        found.setdefault(slug, (title, []))[1].append(name)
    return dict(sorted(found.items(), key=lambda item: order.index((item[0], item[1][0]))))


def area_path(slug: str) -> str:
    """Where an area's page is, under docs/."""
    return f"reference/python/{slug}.md"


def _directive(path: str) -> str:
    """The mkdocstrings directive for ``path``. A settings model's fields are documented once,
    on the manifest reference (type, limits, default, description): here its docstring and a
    link there, instead of each field's source line."""
    package, _, name = path.rpartition(".")
    section = _manifest_sections().get(name)
    if section is None:
        return f"::: {path}\n"
    link = f"[manifest reference](../{section})" if package == "runtime_core" else \
        f"[manifest reference]({section})"
    return (f"::: {path}\n    options:\n      members: false\n\n"
            f"Its fields, with their types, limits and defaults: {link}.\n")


def _manifest_sections() -> dict[str, str]:
    """Settings model name -> its section of the manifest reference (from reference/)."""
    from .manifest_page import nested_models, process_config

    found = {process_config().__name__: "manifest.md#process-settings"}
    for _, model in nested_models():
        found.setdefault(model.__name__, f"manifest.md#{anchor(model.__name__)}")
    return found


def render_index() -> str:
    """The index page: every public name by area, each with its docstring's first sentence."""
    parts = [banner("python_api_page"), INDEX_INTRO]
    for slug, (title, names) in areas().items():
        parts.append(f"## [{title}](python/{slug}.md)\n")
        rows = [(f"[{code(name)}](python/{slug}.md#runtime_core.{name})",
                 _summary("runtime_core", name)) for name in names]
        parts.append(table(("Name", "What it is"), rows))
    journal = [name for name in public_names("runtime_core")
               if name in set(public_names("runtime_core.journal"))]
    parts.append("## [The journal](python-journal.md)\n")
    parts.append("Also importable from `runtime_core`:\n")
    parts.append(table(("Name", "What it is"), [
        (f"[{code(name)}](python-journal.md#runtime_core.journal.{name})",
         _summary("runtime_core.journal", name)) for name in journal]))
    return "\n".join(parts)


def render_area(slug: str) -> str:
    """One area's page: a mkdocstrings directive per name."""
    title, names = areas()[slug]
    parts = [banner("python_api_page"), f"# {title}\n",
             "Importable from `runtime_core`; the [index](../python.md) lists every name.\n"]
    parts += [_directive(f"runtime_core.{name}") for name in names]
    return "\n".join(parts)


def render_journal() -> str:
    """The runtime_core.journal page: every public name, in ``__all__`` order."""
    parts = [banner("python_api_page"), JOURNAL_INTRO]
    parts += [_directive(f"runtime_core.journal.{name}")
              for name in public_names("runtime_core.journal")]
    return "\n".join(parts)


def pages() -> dict[str, str]:
    """Every Python API page: path under docs/ -> its Markdown."""
    found = {"reference/python.md": render_index(), JOURNAL_PAGE: render_journal()}
    for slug in areas():
        found[area_path(slug)] = render_area(slug)
    return found
