"""How a manifest written for the reference runtime is read: its plugins (imported first, errors
at their lines), its spellings (accepted, with a note at their lines; errors under the name the
author wrote), its journal folder, its memory and context sections."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from runtime_core.manifest.loader import ManifestError, load_manifest
from runtime_core.triggers.custom import unregister_trigger_type


@pytest.fixture
def folder(tmp_path: Path) -> Iterator[Path]:
    yield tmp_path
    for name in [m for m in sys.modules if m.startswith("porting_plugin_")]:
        del sys.modules[name]
    unregister_trigger_type("ticks")


def _write(folder: Path, text: str, name: str = "m.agent") -> Path:
    path = folder / name
    path.write_text(text, encoding="utf-8")
    return path


PLUGIN = """\
import asyncio
from runtime_core import register_trigger_type

class Ticks:
    async def start(self): ...
    async def stop(self): ...
    async def wait_for_next(self):
        await asyncio.Event().wait()

register_trigger_type("ticks", lambda config, *, event_bus=None, broker=None: Ticks(),
                      overwrite=True)
"""


def test_a_plugin_beside_the_manifest_registers_its_trigger_type(folder: Path) -> None:
    (folder / "porting_plugin_ok.py").write_text(PLUGIN)
    manifest = load_manifest(_write(folder, "name: m\nplugins: [porting_plugin_ok]\n"
                                            "triggers:\n  - type: ticks\n"
                                            "    custom_config: {every: 5}\n"))
    assert manifest.config.triggers[0].custom_config == {"every": 5}


def test_plugin_problems_are_reported_at_their_lines(folder: Path) -> None:
    (folder / "porting_plugin_raises.py").write_text("raise RuntimeError('no config here')\n")
    (folder / "porting_plugin_exits.py").write_text("import sys\nsys.exit(3)\n")
    path = _write(folder, "name: m\nplugins:\n  - porting_plugin_raises\n"
                          "  - porting_plugin_exits\n  - porting_plugin_missing\n"
                          "  - tools/thing.py\n  - 42\n"
                          "triggers:\n  - {type: ticks}\n")
    with pytest.raises(ManifestError) as caught:
        load_manifest(path)
    found = {(p.line, p.path): p.message for p in caught.value.problems}
    assert "RuntimeError: no config here" in found[(3, "plugins[0]")]
    assert "called sys.exit(3)" in found[(4, "plugins[1]")]
    assert "No module named 'porting_plugin_missing'" in found[(5, "plugins[2]")]
    assert "not a module path" in found[(6, "plugins[3]")]
    assert "'thing', not its file" in found[(6, "plugins[3]")]
    assert "not a module path" in found[(7, "plugins[4]")]
    assert "unknown trigger type 'ticks'" in found[(9, "triggers[0]")]
    scalar = _write(folder, "name: m\nplugins: porting_plugin_ok\n", "scalar.agent")
    with pytest.raises(ManifestError, match="plugins is a list of module paths"):
        load_manifest(scalar)


def test_notes_and_errors_point_at_what_the_author_wrote(folder: Path) -> None:
    manifest = load_manifest(_write(folder, """\
name: m
triggers:
  - type: cron
    cron_expression: "0 * * * *"
    cron_timezone: UTC
  - type: file_watch
    watch_path: ./in
    watch_events: [created, moved]
    filter_expression: filename.endswith('.csv')
memory: {provider: in_memory, max: 4, timeout: 2}
journal: {path: ./journal-folder}
context: {writable_keys: [a], conversation_max_messages: 10}
"""))
    notes = "\n".join(manifest.notes)
    assert f"{folder / 'm.agent'}:5:5: triggers[0].cron_timezone: 'cron_timezone' is" in notes
    assert ":8:19: triggers[1].watch_events: watch_events 'created'" in notes
    assert "watch_events 'moved' is the reference runtime's name; promptui reads it as " \
           "'added' and 'deleted'" in notes
    assert ":9:24: triggers[1].filter_expression: reads 'filename' from the payload" in notes
    assert "memory.max: 'max' is the reference runtime's spelling of 'inject_limit'" in notes
    assert "memory.timeout" in notes
    assert ":11:17: journal.path: './journal-folder' is a folder: the journal is " \
           "journal-folder/journal.db" in notes
    config = manifest.config
    assert (config.memory.inject_limit, config.memory.inject_timeout) == (4, 2.0)
    assert config.context.writable_keys == ["a"]
    assert config.context.conversation_max_messages == 10
    assert config.journal.path == "journal-folder/journal.db"

    with pytest.raises(ManifestError) as caught:
        load_manifest(_write(folder, """\
name: m
triggers:
  - type: file_watch
    watch_path: ./in
    watch_debounce_seconds: -1
  - {type: cron, cron_expression: "* * * * *", cron_timezone: UTC, timezone: UTC}
memory: {provider: in_memory, max: 99, auto_store: true}
context: {writable_keys: nope}
""", "bad.agent"))
    found = {p.path: (p.line, p.message) for p in caught.value.problems}
    assert found["triggers[0].watch_debounce_seconds"][0] == 5
    assert "give only timezone" in found["triggers[1]"][1]
    assert "auto_store (storing every exchange) is not offered" in found["memory"][1]
    assert found["context.writable_keys"][0] == 8


def test_a_manifest_without_reference_spellings_has_no_notes(folder: Path) -> None:
    manifest = load_manifest(_write(folder, """\
name: m
triggers:
  - {type: cron, cron_expression: "0 * * * *", timezone: UTC,
     filter_expression: "payload.n > 1"}
journal: {path: .promptui/journal.db}
"""))
    assert manifest.notes == []
