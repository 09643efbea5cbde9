"""Packaging beyond what pyproject.toml can say: the package list and the folders mapped into
it. setuptools reads everything else from pyproject.toml.

A wheel carries the top-level folders ``demo_manifests/`` and ``themes/`` inside promptui, as
``promptui/_bundled/demo_manifests`` and ``promptui/_bundled/themes`` (read by
promptui/bundled.py), so an installed promptui finds its demo and themes from any folder.
MANIFEST.in lists their files (include-package-data ships them). pyproject.toml can map a
folder into a package, but cannot list mapped packages beside found ones, nor a mapped
folder's sub-folders (the demo's scripts/).
"""

from __future__ import annotations

from pathlib import Path

from setuptools import find_packages, setup

HERE = Path(__file__).resolve().parent
#: Package in the wheel -> the checkout's folder it is made of.
BUNDLED = {"promptui._bundled.demo_manifests": "demo_manifests",
           "promptui._bundled.themes": "themes"}


def bundled_packages() -> list[str]:
    """Each bundled folder and every folder in it (caches aside), as packages of promptui."""
    packages = []
    for package, folder in BUNDLED.items():
        packages.append(package)
        for sub in sorted((HERE / folder).rglob("*")):
            if sub.is_dir() and "__pycache__" not in sub.parts:
                packages.append(".".join([package, *sub.relative_to(HERE / folder).parts]))
    return packages


setup(packages=[*find_packages(include=["runtime_core*", "promptui*"]), *bundled_packages()],
      package_dir=BUNDLED)
