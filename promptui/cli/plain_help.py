"""Help that reads like a command line. Typer 0.2x's rich help prints each parameter's Python
type as its metavar: "<bool>" after every flag (even --help), "<str>", "<path>",
"<list[Path]>", "<float range>", "<plain|json>". This is the one place that says it the way
command lines do: nothing after a flag; PATH, TEXT, N, NUMBER or [a|b] after a value (an
explicit metavar, e.g. SECONDS, wins); PROCESS [ENTRY] in the usage line. ``Typer`` hands its
classes to every command and group, so a command added later gets them too."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any, get_args, get_origin

import typer
from typer.core import TyperArgument, TyperCommand, TyperGroup, TyperOption
from typer.models import CommandFunctionType

_WORDS: dict[Any, str] = {str: "TEXT", int: "N", float: "NUMBER"}


def _type_word(param: TyperArgument | TyperOption, ctx: Any) -> str | None:
    if isinstance(param, TyperOption):
        if param.metavar is not None:
            return param.metavar
        if param.is_flag or param.count:
            return None
    described = param.type_descriptor
    if described.is_choice:  # typer's own label, "<plain|json>", as click writes it
        return f"[{param.display_type(ctx).strip('<>')}]"
    kind: Any = described.annotation
    if get_origin(kind) is list:  # a repeatable option or a variadic argument: one value's word
        (kind,) = get_args(kind)
    if isinstance(kind, type) and issubclass(kind, Path):
        return "PATH"
    return _WORDS.get(kind) or getattr(kind, "__name__", "value").upper()


class _PlainOption(TyperOption):
    def display_type_rich(self, ctx: Any) -> str | None:
        return _type_word(self, ctx)


class _PlainArgument(TyperArgument):
    def display_type_rich(self, ctx: Any) -> str | None:
        return _type_word(self, ctx)

    def get_usage_pieces(self, ctx: Any) -> list[str]:
        word = (self.metavar or self.name or "arg").upper()
        word = word if self.required else f"[{word}]"
        return [word + ("..." if self.nargs != 1 else "")]


def _plain(params: list[Any]) -> list[Any]:
    # Typer makes its parameter objects itself, with no say in their class; the subclasses add
    # display methods only (no state), so giving an object one of them changes nothing else.
    for param in params:
        if type(param) is TyperOption:
            param.__class__ = _PlainOption
        elif type(param) is TyperArgument:
            param.__class__ = _PlainArgument
    return params


class PlainCommand(TyperCommand):
    def get_params(self, ctx: Any) -> list[Any]:
        return _plain(super().get_params(ctx))


class PlainGroup(TyperGroup):
    def get_params(self, ctx: Any) -> list[Any]:
        return _plain(super().get_params(ctx))


class Typer(typer.Typer):
    """``typer.Typer`` whose groups and commands print plain help (see above)."""

    def __init__(self, **options: Any) -> None:
        options.setdefault("cls", PlainGroup)
        super().__init__(**options)

    def command(self, name: str | None = None, *, cls: type[TyperCommand] | None = None,
                **options: Any) -> Callable[[CommandFunctionType], CommandFunctionType]:
        return super().command(name, cls=cls or PlainCommand, **options)
