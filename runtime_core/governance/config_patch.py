"""A live change to a governance config (PATCH .../health): a JSON merge patch (RFC 7386: a
``null`` removes a key, so the field goes back to its default) checked as a whole, with strict
JSON types, before anything changes."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, TypeVar, get_args

from pydantic import BaseModel, ValidationError

from runtime_core.strict import STRICT_KEYS_CONTEXT

M = TypeVar("M", bound=BaseModel)


class ConfigPatchError(ValueError):
    """``code`` is UNKNOWN_FIELD or INVALID_CONFIG; the message names the dotted field."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = code


def merge_patch(target: Any, patch: Any) -> Any:
    if not isinstance(patch, Mapping):
        return patch
    merged = dict(target) if isinstance(target, Mapping) else {}
    for key, value in patch.items():
        if value is None:
            merged.pop(key, None)
        else:
            merged[key] = merge_patch(merged.get(key), value)
    return merged


def _model_of(annotation: Any) -> type[BaseModel] | None:
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return annotation
    for arg in get_args(annotation):  # Optional[Model], Model | None
        found = _model_of(arg)
        if found is not None:
            return found
    return None


def unknown_fields(model: type[BaseModel], data: Mapping[str, Any], prefix: str = "") -> list[str]:
    """Dotted paths of the keys ``model`` (and the models inside it) does not have."""
    found: list[str] = []
    for key, value in data.items():
        path = f"{prefix}{key}"
        field = model.model_fields.get(str(key))
        if field is None:
            found.append(path)
            continue
        inner = _model_of(field.annotation)
        if inner is not None and isinstance(value, Mapping):
            found.extend(unknown_fields(inner, value, f"{path}."))
    return found


def apply_patch(current: M, patch: Mapping[str, Any]) -> M:
    """The config ``current`` becomes under ``patch``; ConfigPatchError, changing nothing, when
    a key is unknown or a value is invalid."""
    model = type(current)
    unknown = unknown_fields(model, patch)
    if unknown:
        raise ConfigPatchError("UNKNOWN_FIELD", f"unknown field(s): {', '.join(unknown)}; "
                               f"{model.__name__} has: {', '.join(model.model_fields)}")
    merged = merge_patch(current.model_dump(mode="json", exclude_unset=False), patch)
    try:
        return model.model_validate(merged, strict=True, context={STRICT_KEYS_CONTEXT: True})
    except ValidationError as exc:
        problems = "; ".join(
            f"{'.'.join(str(p) for p in err['loc']) or '(whole)'}: {err['msg']}"
            for err in exc.errors())
        raise ConfigPatchError("INVALID_CONFIG", f"invalid {model.__name__}: {problems}"
                               ) from None
