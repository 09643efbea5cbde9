"""The generators of the documentation site's reference pages: each reads the code (the Typer
app, the pydantic models, the action registry, the OpenAPI document, ``__all__``) and returns
Markdown. ``docs/hooks/reference.py`` hands their pages to MkDocs at build time; the tests call
them directly. ``python -m docs.gen DIR`` writes the pages under DIR, to read them as files."""

from __future__ import annotations

from collections.abc import Callable

from . import cli_page, http_api_page, keys_page, manifest_page, python_api_page

#: The pages with one generator each: path under docs/ -> the function that writes it.
PAGES: dict[str, Callable[[], str]] = {
    "reference/cli.md": cli_page.render,
    "reference/manifest.md": manifest_page.render,
    "reference/keys.md": keys_page.render,
    "reference/http-api.md": http_api_page.render,
}


def render_all() -> dict[str, str]:
    """Every generated page, the Python API's included: path under docs/ -> its Markdown."""
    rendered = {path: render() for path, render in PAGES.items()}
    rendered.update(python_api_page.pages())
    return rendered
