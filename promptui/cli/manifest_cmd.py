"""``promptui manifest NAME``: a process's configuration as a manifest on stdout (``> x.agent``),
from the served runtime (its configuration now, live changes included), or with ``--from PATH``
from manifest files, read as promptui reads them (a manifest written for the reference runtime
comes out in promptui's spellings). Credentials are ``${VAR}`` references, never values."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import TYPE_CHECKING

import typer

from promptui.cli.options import (
    NAME_ARGUMENT,
    TOKEN_OPTION,
    URL_OPTION,
    fail,
    need_server,
    on_server,
)

if TYPE_CHECKING:
    from runtime_core.control.remote import RemoteControl

FROM_OPTION = typer.Option(None, "--from", metavar="PATH",
                           help="Read the process from these manifest files (a file or a "
                                "folder) instead of a served runtime.")


def manifest(name: str = NAME_ARGUMENT, source: Path | None = FROM_OPTION,
             url: str | None = URL_OPTION, token: str | None = TOKEN_OPTION) -> None:
    """Print a process's configuration as a manifest (credentials as ${VAR} references)."""
    if source is not None:
        text = _from_files(name, source)
    else:
        target = need_server(url, token)

        async def read(control: RemoteControl) -> str:
            return await control.manifest_text(name)

        text = on_server(target, read)
    sys.stdout.write(text)


def _from_files(name: str, source: Path) -> str:
    from runtime_core.manifest.loader import ManifestError, load_directory, load_manifest
    from runtime_core.manifest.save import manifest_text

    try:
        found = load_directory(source) if source.is_dir() else [load_manifest(source)]
    except ManifestError as exc:
        raise fail(f"{source} does not load (promptui validate {source} lists why):\n{exc}"
                   ) from None
    for loaded in found:
        if loaded.name == name:
            try:
                return manifest_text(loaded.config, name)
            except ValueError as exc:
                raise fail(str(exc)) from None
    names = ", ".join(m.name for m in found) or "none"
    raise fail(f"no process {name!r} in {source} (processes: {names})")
