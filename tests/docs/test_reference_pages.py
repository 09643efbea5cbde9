"""The generated reference pages (docs/gen) list everything the code has: every command and
option of the CLI, every field of the manifest's models, every key of the room, every route of
the HTTP API, every public Python name. The expectations are read from the code here, not
written down, so a new command, field, key or route that the page misses fails."""

from __future__ import annotations

import re

import pytest
import typer.main
from pydantic import BaseModel

import runtime_core
import runtime_core.journal
from docs.gen import cli_page, http_api_page, keys_page, manifest_page, python_api_page, render_all
from promptui import actions
from promptui.cli.main import app
from runtime_core.config import ProcessConfig


def _commands() -> dict[str, object]:
    from typer import _click

    root = typer.main.get_command(app)
    ctx = _click.Context(root, info_name="promptui")
    return {name: root.get_command(ctx, name) for name in root.list_commands(ctx)}


def test_the_cli_page_names_every_command_and_its_options() -> None:
    page = cli_page.render()
    commands = _commands()
    assert len(commands) >= 20  # the app was read, not an empty group
    for name, command in commands.items():
        assert re.search(rf"^## promptui {re.escape(name)}$", page, re.M), name
        for param in command.params:  # type: ignore[attr-defined]
            if param.param_type_name == "option" and not param.hidden:
                assert f"`{param.opts[0]}`" in page, (name, param.opts)
    assert "### promptui journal export" in page  # a group's commands, one level down
    assert "promptui --install-completion" in page


def test_a_new_command_appears_on_the_cli_page_by_itself() -> None:
    def frobnicate(count: int = typer.Option(3, "--count", help="How many frobs.")) -> None:
        """Frobnicate the journal."""

    app.command("frobnicate")(frobnicate)
    try:
        page = cli_page.render()
    finally:
        app.registered_commands.pop()
    assert "## promptui frobnicate" in page
    assert "| `--count` | `N` | `3` | How many frobs. |" in page


def _models() -> list[type[BaseModel]]:
    found: list[type[BaseModel]] = []
    pending: list[type[BaseModel]] = [ProcessConfig]
    while pending:
        model = pending.pop()
        if model in found:
            continue
        found.append(model)
        for field in model.model_fields.values():
            pending += _submodels(field.annotation)
    return found


def _submodels(annotation: object) -> list[type[BaseModel]]:
    import typing

    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return [annotation]
    return [m for arg in typing.get_args(annotation) for m in _submodels(arg)]


def test_the_manifest_page_lists_every_field_of_process_config_and_its_parts() -> None:
    page = manifest_page.render()
    models = _models()
    assert len(models) > 10
    for model in models:
        section = page if model is ProcessConfig else page.split(f"## {model.__name__}\n")[1]
        for name, field in model.model_fields.items():
            assert f"| `{field.alias or name}` |" in section, (model.__name__, name)
    for name in ProcessConfig.model_fields:
        assert re.search(rf"^\| `{name}` \| `(config\.)?\w+`", page, re.M), name


def test_every_field_a_manifest_can_set_has_a_description() -> None:
    """The manifest page's Description column comes from ``Field(description=...)``."""
    missing = [f"{model.__name__}.{name}" for model in _models()
               for name, field in model.model_fields.items() if not field.description]
    assert not missing, f"add description= to: {', '.join(missing)}"


def test_the_keys_page_lists_every_action_of_the_registry() -> None:
    page = keys_page.render()
    specs = [spec for value in vars(actions).values()
             for spec in (value if isinstance(value, tuple) else (value,))
             if isinstance(spec, actions.ActionSpec)]
    assert len(specs) > 40
    for spec in specs:
        assert f"| {spec.description} | `{spec.binding_id}` |" in page, spec.binding_id
    assert "| `?` `f1` | Help | `promptui.help` |" in page  # keys as the room shows them


def test_a_new_list_of_actions_appears_on_the_keys_page(monkeypatch: pytest.MonkeyPatch
                                                         ) -> None:
    extra = (actions.ActionSpec("archive.purge", "P", "purge", "Purge", mutating=True),)
    monkeypatch.setattr(actions, "ARCHIVE_ACTIONS", extra, raising=False)
    page = keys_page.render()
    assert "## Archive\n" in page
    assert "| `P` | Purge | `promptui.archive.purge` | yes |" in page


def test_the_http_api_page_lists_every_route_and_method() -> None:
    page = http_api_page.render()
    document = http_api_page.control_app().openapi()
    routes = [(method.upper(), path) for path, item in document["paths"].items()
              for method in item]
    assert len(routes) > 30
    for method, path in routes:
        assert f"### `{method} {path}`" in page, (method, path)
    assert "### `GET /api/v1/cluster/nodes`" in page
    assert "## Webhook servers" in page and "`stripe`" in page


def test_the_python_pages_document_every_public_name() -> None:
    pages = python_api_page.pages()
    everything = "\n".join(pages.values())
    journal = pages["reference/python-journal.md"]
    for name in runtime_core.journal.__all__:
        assert f"::: runtime_core.journal.{name}\n" in journal, name
    index = pages["reference/python.md"]
    for name in runtime_core.__all__:
        documented = f"::: runtime_core.{name}\n" in everything
        linked = f"(python-journal.md#runtime_core.journal.{name})" in index
        assert documented or linked, name
        assert f"[`{name}`](" in index, name  # the index lists it, with a link


def test_every_generated_page_is_in_the_nav() -> None:
    from pathlib import Path

    import yaml

    root = Path(__file__).resolve().parents[2]
    nav = yaml.safe_load((root / "mkdocs.yml").read_text().replace("!!python/name:", ""))["nav"]
    assert set(render_all()) <= set(_nav_pages(nav))


def _nav_pages(nav: object) -> list[str]:
    if isinstance(nav, str):
        return [nav]
    if isinstance(nav, list):
        return [page for item in nav for page in _nav_pages(item)]
    if isinstance(nav, dict):
        return [page for value in nav.values() for page in _nav_pages(value)]
    return []
