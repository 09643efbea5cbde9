"""``reference/cli.md``: every command and subcommand of ``promptui``, read from the Typer app
through click's introspection (the objects ``--help`` is printed from), so the page lists what
the program takes, not what someone remembered to write down."""

from __future__ import annotations

import enum
from collections.abc import Iterator
from pathlib import PurePath
from typing import Any

from .markdown import banner, cell, code, prose, table

COMPLETION = """\
## Shell completion

`promptui` completes its commands, options and the choices of an option (`--log-format`,
`--type`, ...) in bash, zsh, fish and PowerShell. Install it once for the shell you are in:

```console
$ promptui --install-completion
```

then open a new terminal. `promptui --show-completion` prints the script instead, to put it
where you keep such things (a dotfiles repository, `/etc/bash_completion.d/`); name the shell
to be explicit: `promptui --show-completion zsh`.
"""


def root_command() -> Any:
    """The click command ``promptui`` runs: the Typer app turned into its click group."""
    import typer.main

    from promptui.cli.main import app

    return typer.main.get_command(app)


def _context(command: Any, name: str, parent: Any | None) -> Any:
    from typer import _click

    return _click.Context(command, info_name=name, parent=parent)


def _subcommands(group: Any, ctx: Any) -> Iterator[tuple[str, Any]]:
    if not hasattr(group, "list_commands"):
        return
    for name in group.list_commands(ctx):
        command = group.get_command(ctx, name)
        if command is not None and not command.hidden:
            yield name, command


def walk(command: Any | None = None, name: str = "promptui",
         parent: Any | None = None) -> Iterator[tuple[Any, Any]]:
    """(command, its context) for ``promptui`` and every command below it, depth first, in
    the order ``--help`` lists them."""
    command = command or root_command()
    ctx = _context(command, name, parent)
    yield command, ctx
    for sub_name, sub in _subcommands(command, ctx):
        yield from walk(sub, sub_name, ctx)


def command_names() -> list[str]:
    """The top-level commands, as ``promptui --help`` lists them."""
    root = root_command()
    return [name for name, _ in _subcommands(root, _context(root, "promptui", None))]


def _default(param: Any, ctx: Any) -> str:
    if getattr(param, "is_flag", False) and not getattr(param, "secondary_opts", None):
        return ""  # a flag is off unless given
    value = param.get_default(ctx, call=True)
    if value is None or value == () or value == []:
        return ""
    if isinstance(value, enum.Enum):
        value = value.value
    if isinstance(value, PurePath):
        value = str(value)
    if isinstance(value, bool) and getattr(param, "secondary_opts", None):
        return code(param.opts[0] if value else param.secondary_opts[0])
    return code(value)


def _value(param: Any, ctx: Any) -> str:
    word = param.display_type_rich(ctx) if hasattr(param, "display_type_rich") else None
    if word is None:
        return ""
    return code(f"{word} {_limits(param)}".strip())


def _limits(param: Any) -> str:
    """A number's bounds as ``--help`` shows them (``[x>=1]``), or ""."""
    # Typer 0.2x+ keeps min and max on the parameter; earlier ones on click's range type.
    describe = getattr(param, "_get_number_range_help_str", None)
    if describe is not None:
        return f"[{describe()}]" if describe() else ""
    legacy = getattr(getattr(param, "type", None), "_describe_range", None)
    return f"[{legacy()}]" if legacy is not None else ""


def _names(param: Any) -> str:
    if param.param_type_name == "argument":
        word = (param.metavar or param.name or "").upper()
        return code(word + ("..." if param.nargs != 1 else ""))
    # Long names first, as the help's first column reads best: --lines -n.
    names = sorted(param.opts, key=lambda n: not n.startswith("--")) + list(param.secondary_opts)
    return " ".join(code(n) for n in names)


def _description(param: Any) -> str:
    text = cell(prose(param.help or ""))
    if param.required:
        text = f"**Required.** {text}"
    envvar = getattr(param, "envvar", None)
    if envvar:
        names = envvar if isinstance(envvar, list | tuple) else [envvar]
        text += " Environment: " + ", ".join(code(n) for n in names) + "."
    return text


def command_section(command: Any, ctx: Any) -> str:
    """One command's heading, help, usage and parameter table."""
    path = ctx.command_path
    level = "#" * (2 if path.count(" ") <= 1 else 3)
    parts = [f"{level} {path}\n", prose(command.help or command.short_help or "") + "\n"]
    parts.append(f"```text\n{command.get_usage(ctx)}\n```\n")
    params = [p for p in command.get_params(ctx)
              if not getattr(p, "hidden", False) and p.name != "help"]
    if params:
        rows = [(_names(p), _value(p, ctx), _default(p, ctx), _description(p)) for p in params]
        parts.append(table(("Argument or option", "Value", "Default", "Description"), rows))
    subs = list(_subcommands(command, ctx))
    if subs and ctx.parent is not None:
        listed = ", ".join(f"[`{path} {name}`](#{_slug(f'{path} {name}')})" for name, _ in subs)
        parts.append(f"Commands: {listed}.\n")
    return "\n".join(parts)


def _slug(heading: str) -> str:
    return heading.lower().replace(" ", "-")


def _index(root: Any, ctx: Any) -> str:
    rows = []
    for name, command in _subcommands(root, ctx):
        summary = command.get_short_help_str(limit=200)
        rows.append((f"[`{name}`](#{_slug('promptui ' + name)})", cell(summary)))
    return table(("Command", "What it does"), rows)


def render() -> str:
    """The whole CLI reference page."""
    commands = list(walk())
    root, root_ctx = commands[0]
    parts = [
        banner("cli_page"),
        "# Command line\n",
        "Every command of `promptui`, with its arguments and options, read from the program "
        "itself: `promptui COMMAND --help` prints the same. `promptui` alone opens the control "
        "room on the bundled demo (or on the manifests given to `promptui ui`).\n",
        _index(root, root_ctx),
        command_section(root, root_ctx),
    ]
    parts += [command_section(command, ctx) for command, ctx in commands[1:]]
    parts.append(COMPLETION)
    return "\n".join(parts)
