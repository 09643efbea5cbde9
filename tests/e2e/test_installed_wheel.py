"""The wheel, installed into a fresh venv (not editable), works from any folder: the demo runs
headless, ``python -m promptui`` answers, the bundled themes and demo are found inside the
venv (not in the checkout), the room opens on the demo in a real terminal, ``promptui init``
writes a manifest that validates, and nothing is written into the venv.

The wheel is built from a copy of the checkout (a build writes ``build/`` and ``*.egg-info``
beside the sources, and the checkout is shared). The fresh venv gets the wheel with
``--no-deps`` and a ``.pth`` naming this venv's site-packages for the dependencies: no download
on every run. A folder a ``.pth`` adds is not a site folder, so the ``.pth`` files there (this
checkout's editable install) are not run; the test checks that promptui is the venv's copy."""

from __future__ import annotations

import importlib.util
import json
import os
import shlex
import shutil
import subprocess
import sys
import sysconfig
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path

import pytest

from tests.helpers.polling import poll
from tests.helpers.room import DEMO
from tests.helpers.tmux import private_tmux, tmux_missing

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]
#: Top-level entries of the checkout a wheel is not built from, besides the dot-folders (.git,
#: .venv, caches) and *.egg-info: the rest is copied.
NOT_COPIED = {"build", "dist", "site", "tests", "docs", "bench", "node_modules"}
#: What the test's commands must not inherit: each would point them at something else.
UNSET = ("PYTHONPATH", "PYTHONHOME", "VIRTUAL_ENV", "PROMPTUI_URL", "PROMPTUI_TOKEN",
         "PROMPTUI_CONFIG", "PROMPTUI_DEMO_DIR")
DEMO_SECONDS = 10  # the feeder's 4 s interval fires, its invoice is booked, a deploy is logged


def test_the_installed_wheel_works_from_any_folder(tmp_path: Path) -> None:
    venv = install_wheel(build_wheel(tmp_path), tmp_path / "venv")
    bin_dir = venv / "bin"
    work = tmp_path / "elsewhere"  # the user's folder: outside the checkout and the venv
    work.mkdir()
    env = {key: value for key, value in os.environ.items() if key not in UNSET}
    env |= {"XDG_CONFIG_HOME": str(tmp_path / "config"), "PROMPTUI_DEMO_WEBHOOK_PORT": "0",
            "PATH": f"{bin_dir}{os.pathsep}{env.get('PATH', '')}", "TERM": "xterm-256color"}

    def run(*args: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
        return subprocess.run([*args], cwd=work, env=env, capture_output=True, text=True,
                              timeout=timeout, stdin=subprocess.DEVNULL)

    # promptui is the venv's copy, and finds its demo and themes inside it
    where = run(str(bin_dir / "python"), "-c", WHERE)
    assert where.returncode == 0, where.stderr
    found = {name: Path(path) for name, path in json.loads(where.stdout).items()}
    for name, path in found.items():
        assert path.is_relative_to(venv), f"{name} is not the venv's: {path}"
    assert_same_files(ROOT / "demo_manifests", found["demo"])
    assert_same_files(ROOT / "themes", found["themes"])
    before = files_of(venv)

    version_line = run(str(bin_dir / "python"), "-m", "promptui", "--version")
    assert version_line.returncode == 0, version_line.stderr
    assert version_line.stdout.strip() == f"promptui {package_version()}"

    located = run(str(bin_dir / "promptui"), "locate", "themes")
    assert located.returncode == 0, located.stderr
    assert located.stdout.splitlines()[1] == f"bundled: {found['themes']}"

    # the headless demo runs every process from the installed manifests, writing only here
    demo = run(str(bin_dir / "promptui"), "demo", "--seconds", str(DEMO_SECONDS), "--json",
               timeout=90)
    assert demo.returncode == 0, demo.stderr
    processes = json.loads(demo.stdout)["processes"]
    assert sorted(processes) == DEMO
    assert {p["state"] for p in processes.values()} == {"stopped"}
    for name in ("health-checker", "demo-feeder", "changelog", "invoice-watcher"):
        assert processes[name]["invocation_count"] >= 1, (name, processes[name])
    assert (work / ".promptui" / "journal.db").is_file()
    # the tool modules imported from the venv, the MCP server ran from it, the file watch saw
    # the feeder's invoice in this folder
    assert "invoice-0001.json" in (work / ".promptui" / "demo" / "ledger.txt").read_text()
    assert "deploy requested" in (work / ".promptui" / "demo" / "changelog.md").read_text()

    started = run(str(bin_dir / "promptui"), "init", "-o", "mine.agent")
    assert started.returncode == 0, started.stderr
    checked = run(str(bin_dir / "promptui"), "validate", "mine.agent")
    assert checked.returncode == 0, checked.stdout + checked.stderr

    if not tmux_missing():
        open_the_room(bin_dir, work, env, tmp_path / "exit-code")
    assert files_of(venv) == before, "something was written into the venv"
    if tmux_missing():
        pytest.skip("all but the room passed; the room needs tmux, which is not installed")


WHERE = """\
import json, promptui, runtime_core
from promptui.bundled import demo_manifests_dir, themes_dir
print(json.dumps({"promptui": promptui.__file__, "runtime_core": runtime_core.__file__,
                  "demo": str(demo_manifests_dir()), "themes": str(themes_dir())}))
"""


def open_the_room(bin_dir: Path, work: Path, env: dict[str, str], exit_file: Path) -> None:
    """``promptui ui`` in tmux shows the demo's processes, then ``q`` ends it with status 0."""
    command = shlex.join(["env", *(arg for name in UNSET for arg in ("-u", name)),
                          *(f"{key}={env[key]}" for key in
                            ("XDG_CONFIG_HOME", "PROMPTUI_DEMO_WEBHOOK_PORT", "PATH", "TERM")),
                          str(bin_dir / "promptui"), "ui"])
    with private_tmux(deadline=40) as tmux:
        tmux.start(work, f"{command}; echo $? > {shlex.quote(str(exit_file))}")
        tmux.expect("the demo's processes in the table",
                    lambda screen: all(f"│ {name} " in screen for name in DEMO), cap=30)
        tmux.keys("q")
        answered: list[bool] = []

        def ended() -> bool:
            if not tmux.alive():
                return True
            if not answered and "Quit? " in tmux.screen():  # a run in flight: let it finish
                tmux.keys("Tab", "Enter")  # from Cancel to "Drain, then quit"
                answered.append(True)
            return False

        poll(ended, timeout=20, what="promptui ui to quit after q", interval=0.2)
    assert exit_file.read_text().strip() == "0", "promptui ui exited with an error"


# -- building and installing -----------------------------------------------------------------
def build_wheel(tmp_path: Path) -> Path:
    """The wheel of a copy of this checkout. Without build isolation when this venv can
    build one (no download); else pip fetches the build requirements."""
    source, out = tmp_path / "source", tmp_path / "dist"
    shutil.copytree(ROOT, source, ignore=_not_copied)
    isolation = ["--no-build-isolation"] if _builds_without_isolation() else []
    built = subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "-q",
                            *isolation, "-w", str(out), str(source)],
                           capture_output=True, text=True, timeout=180)
    assert built.returncode == 0, built.stdout + built.stderr
    (wheel,) = out.glob("promptui-*.whl")
    return wheel


def install_wheel(wheel: Path, venv: Path) -> Path:
    """A fresh venv holding ``wheel`` (not editable), its dependencies taken from this venv."""
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True,
                   timeout=60)
    python = venv / "bin" / "python"
    installed = subprocess.run([sys.executable, "-m", "pip", "--python", str(python), "install",
                                "--no-deps", "--no-index", "-q", str(wheel)],
                               capture_output=True, text=True, timeout=120)
    assert installed.returncode == 0, installed.stdout + installed.stderr
    site = subprocess.run([str(python), "-c", "import sysconfig; "
                           "print(sysconfig.get_paths()['purelib'])"],
                          capture_output=True, text=True, check=True, timeout=30).stdout.strip()
    (Path(site) / "promptui-test-dependencies.pth").write_text(
        sysconfig.get_paths()["purelib"] + "\n", encoding="utf-8")
    return venv


def _not_copied(folder: str, names: list[str]) -> set[str]:
    top = Path(folder) == ROOT
    return {name for name in names if (top and (name in NOT_COPIED or name.startswith(".")
                                                or name.endswith(".egg-info")))
            or name == "__pycache__" or name.endswith(".pyc")}


def _builds_without_isolation() -> bool:
    """This venv can build the wheel itself: setuptools with bdist_wheel built in (70.1+), or
    an older setuptools with the wheel package."""
    try:
        found = tuple(int(part) for part in version("setuptools").split(".")[:2])
    except (PackageNotFoundError, ValueError):
        return False
    return found >= (70, 1) or (found >= (64, 0) and importlib.util.find_spec("wheel") is not None)


# -- what the checks compare -----------------------------------------------------------------
def assert_same_files(source: Path, installed: Path) -> None:
    """Every file of the checkout's ``source`` folder is in ``installed``, byte for byte
    (not a cache, not a dotfile such as .gitkeep)."""
    files = [path for path in source.rglob("*") if path.is_file()
             and "__pycache__" not in path.parts and path.suffix != ".pyc"
             and not path.name.startswith(".")]
    assert files, f"nothing in {source}"
    for path in files:
        copy = installed / path.relative_to(source)
        assert copy.is_file(), f"{path.relative_to(ROOT)} is not in the wheel"
        assert copy.read_bytes() == path.read_bytes(), f"{copy} differs from {path}"


def files_of(folder: Path) -> dict[str, tuple[int, int]]:
    """Everything under ``folder``: a file's size and modification time, a folder's name."""
    return {str(path.relative_to(folder)): (path.stat().st_size, path.stat().st_mtime_ns)
            if path.is_file() else (0, 0) for path in folder.rglob("*")}


def package_version() -> str:
    """The version the checkout declares (the wheel was built from it)."""
    from promptui import __version__

    return __version__
