"""The settings of runs: the budget each run gets, and the profile whose completion contract
decides when a run has succeeded."""

from __future__ import annotations

from typing import Annotated

from pydantic import Field

from runtime_core.runs.completion import CompletionConfig, ProfileConfig, VerificationRule
from runtime_core.strict import StrictModel

__all__ = ["CompletionConfig", "ProfileConfig", "RunBudgetConfig", "VerificationRule"]


class RunBudgetConfig(StrictModel):
    """Per-run limits, each checked on its own. ``None`` means unlimited."""

    max_seconds: Annotated[float, Field(gt=0)] | None = Field(default=300.0, description=(
        "Seconds a run may take; past it the run fails with reason budget."))
    max_model_calls: Annotated[int, Field(ge=1)] | None = Field(default=25, description=(
        "Model calls a run may make."))
    max_tool_calls: Annotated[int, Field(ge=0)] | None = Field(default=50, description=(
        "Tool calls a run may make."))
    max_output_chars: Annotated[int, Field(ge=1)] | None = Field(default=100_000, description=(
        "Characters of model output a run may produce."))
