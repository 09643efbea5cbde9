"""The pydantic bases of every config and wire message.

``StrictModel`` refuses unknown keys, so a typo never passes silently. ``KeyCheckedModel`` is the
governance configs' variant the spec asks for: strict where the input is a file or an API patch
(validated with ``context={"strict_keys": True}``), forgiving with a FutureWarning where it is
Python code."""

from __future__ import annotations

import os
import sys
import warnings
from collections.abc import Mapping
from types import FrameType
from typing import Any, Self

from pydantic import BaseModel, ConfigDict, ValidationInfo, model_validator

STRICT_KEYS_CONTEXT = "strict_keys"


class StrictModel(BaseModel):
    # defer_build: a model builds its validator on first use, not at import (measured: the
    # import of ProcessConfig and its first validation together are faster than eager builds).
    model_config = ConfigDict(extra="forbid", validate_assignment=True, defer_build=True)


def _caller_stacklevel() -> int:
    """Stack level of the first frame outside pydantic and this module, so the warning points
    at the caller's ``HealthConfig(...)`` line rather than at pydantic internals."""
    level = 1
    frame: FrameType | None = sys._getframe(1)
    while frame is not None:
        filename = frame.f_code.co_filename
        if filename != __file__ and f"{os.sep}pydantic" not in filename:
            return level
        frame = frame.f_back
        level += 1
    return 2


class KeyCheckedModel(BaseModel):
    """Unknown keys: rejected when validated with ``context={"strict_keys": True}`` (manifests,
    API patches), otherwise dropped with a FutureWarning (Python callers, as the spec says)."""

    model_config = ConfigDict(extra="ignore", validate_assignment=True, allow_inf_nan=False,
                              defer_build=True)

    @model_validator(mode="before")
    @classmethod
    def _check_unknown_keys(cls, data: Any, info: ValidationInfo) -> Any:
        if not isinstance(data, Mapping):
            return data
        unknown = sorted(str(k) for k in data if k not in cls.model_fields)
        if not unknown:
            return data
        valid = ", ".join(cls.model_fields)
        message = (
            f"unknown {cls.__name__} key(s): {', '.join(unknown)}; valid keys are: {valid}"
        )
        context = info.context
        if isinstance(context, Mapping) and context.get(STRICT_KEYS_CONTEXT):
            raise ValueError(message)
        warnings.warn(f"{message} (ignored)", FutureWarning, stacklevel=_caller_stacklevel())
        return {k: v for k, v in data.items() if k in cls.model_fields}

    @classmethod
    def from_manifest(cls, data: Mapping[str, Any]) -> Self:
        """Validate a manifest block or API patch; an unknown key raises ``ValueError``."""
        return cls.model_validate(dict(data), context={STRICT_KEYS_CONTEXT: True})
