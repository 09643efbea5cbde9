"""Where the files promptui ships beside its code live: the bundled demo and the bundled themes.

In a source checkout they are the top-level folders ``demo_manifests/`` and ``themes/``; a
built wheel carries them inside the package as ``promptui/_bundled/demo_manifests`` and
``promptui/_bundled/themes`` (``setup.py`` maps the folders there), so an installed promptui
finds them from any folder. Both are found through ``importlib.resources`` from the package
itself, never from the current folder. An editable install (``pip install -e .``) finds the
checkout's folders: its import hook serves promptui from the checkout, where ``_bundled`` does
not exist. Only the standard library loads here.
"""

from __future__ import annotations

from importlib.resources import files
from pathlib import Path

#: The folder inside the package that a wheel carries the bundled files in.
PACKAGED = "_bundled"
DEMO_FOLDER = "demo_manifests"
THEMES_FOLDER = "themes"
REINSTALL_HINT = ("reinstall promptui (pip install --force-reinstall promptui; in a source "
                  "checkout: pip install -e .)")


def demo_manifests_dir() -> Path:
    """The folder of the bundled demo's ``.agent`` manifests, their scripts and tool modules:
    what ``promptui demo``, ``promptui ui`` and ``promptui serve`` run when given no paths.
    Read it, never write into it (an installed copy may be read-only); the demo itself writes
    under ``.promptui/`` in the current folder."""
    return bundled_folder(DEMO_FOLDER)


def themes_dir() -> Path:
    """The folder of the bundled colour themes (``*.toml``), loaded before the user's own."""
    return bundled_folder(THEMES_FOLDER)


def bundled_folder(name: str) -> Path:
    """The bundled folder ``name`` as a real path: inside the installed package, else (a
    source checkout, where pyproject.toml sits beside the package) the top-level folder.

    Never raises: when neither exists it returns where an installed copy would have it, so
    the caller can say what is missing; ``missing_message`` words that."""
    package = files("promptui")
    # A real folder for every pip and pipx install: the manifest loader and the demo's MCP
    # server need paths, and a zipped promptui is not a supported install.
    root = Path(str(package))
    packaged = root / PACKAGED / name
    if packaged.is_dir():
        return packaged
    checkout = root.parent
    if (checkout / "pyproject.toml").is_file() and (checkout / name).is_dir():
        return checkout / name  # editable install, or the checkout on PYTHONPATH
    return packaged


def missing_message(what: str, folder: Path) -> str:
    """The error for a bundled folder that is not there (``what``: e.g. "the bundled demo"):
    where it was looked for and what to do."""
    return f"{what} is missing from this promptui install (no folder {folder}): {REINSTALL_HINT}"
