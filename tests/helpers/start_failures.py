"""Manifests of a process that cannot start, one per cause: what each case writes, the field
its error names, and part of the cause it gives."""

from __future__ import annotations

from pathlib import Path

SCRIPTED = "model: {provider: scripted, turns: [{reply: ok}]}\n"
GOOD_TOOL = '''
def fine() -> str:
    """A tool that loads."""
    return "fine"
'''


def manifest(name: str, body: str, model: str = SCRIPTED) -> str:
    return f'version: "1.0"\nname: {name}\ninstructions: Do the thing.\n{model}{body}'


def tools(*paths: str) -> str:
    return "tools:\n" + "".join(f'  - {{path: "{p}", effect: read}}\n' for p in paths)


# name -> (manifest body, model line, files beside the manifest, field, part of the cause)
Case = tuple[str, str, dict[str, str], str, str]
CASES: dict[str, Case] = {
    "tool-not-importable": (tools("no_such_module_xyz:fn"), SCRIPTED, {}, "tools[0]",
                            "cannot import module 'no_such_module_xyz'"),
    "tool-not-in-module": (tools("goodtools:fine", "goodtools:nope"), SCRIPTED,
                           {"goodtools.py": GOOD_TOOL}, "tools[1]",
                           "module 'goodtools' has no attribute 'nope'"),
    "tool-module-raises": (tools("raising_mod:fn"), SCRIPTED,
                           {"raising_mod.py": "raise RuntimeError('boom at import')\n"},
                           "tools[0]", "raised RuntimeError: boom at import"),
    "tool-module-exits": (tools("exiting_mod:fn"), SCRIPTED,
                          {"exiting_mod.py": "import sys\nsys.exit(3)\n"}, "tools[0]",
                          "importing module 'exiting_mod' called sys.exit(3)"),
    "tool-module-exits-0": (tools("quiet_exit_mod:fn"), SCRIPTED,
                            {"quiet_exit_mod.py": "import sys\nsys.exit()\n"}, "tools[0]",
                            "called sys.exit(None)"),
    "script-missing": ("", "model: scripted:scripts/missing.yaml\n", {}, "model",
                       "cannot read model script"),
    "script-not-yaml": ("", "model: scripted:broken.yaml\n", {"broken.yaml": "turns: [\n"},
                        "model", "is not valid YAML"),
    "webhook-port-taken": (
        "triggers:\n  - {type: interval, seconds: 3600}\n"
        "  - {type: webhook, webhook_host: 127.0.0.1, webhook_port: PORT, webhook_path: /a}\n",
        SCRIPTED, {}, "triggers[1]", "Address already in use"),
    "watch-path-is-a-file": ("triggers:\n  - {type: file_watch, watch_path: WATCHED}\n",
                             SCRIPTED, {"not-a-folder.txt": "x"}, "triggers[0]",
                             "is not a directory"),
    "mcp-server-exits": (
        "servers:\n  ledger:\n    type: stdio\n    command: python\n"
        '    args: ["-c", "import sys; sys.exit(2)"]\n', SCRIPTED, {}, "servers.ledger",
        "MCP server 'ledger' could not be connected"),
}


def write_case(folder: Path, name: str, port: int) -> Path:
    """The case's manifest and files in ``folder``/agents (``port``: one already taken)."""
    body, model, files, _, _ = CASES[name]
    agents = folder / "agents"
    agents.mkdir(parents=True)
    body = body.replace("PORT", str(port))
    body = body.replace("WATCHED", str(agents / "not-a-folder.txt"))
    (agents / f"{name}.agent").write_text(manifest(name, body, model))
    for file, text in files.items():
        (agents / file).write_text(text)
    return agents
