"""IncidentConfig: ``incidents:`` in a manifest, the incident lifecycle of a process."""

from __future__ import annotations

from typing import Annotated

from pydantic import Field, ValidationInfo, field_validator

from runtime_core.strict import KeyCheckedModel
from runtime_core.triggers.config import TRIGGER_TYPES
from runtime_core.triggers.filters.expression import FilterError, compile_filter


class IncidentConfig(KeyCheckedModel):
    """``incidents:`` in a manifest. Present means on (``enabled: false`` turns it off)."""

    enabled: bool = Field(default=True, description="false turns incidents off.")
    fingerprint: str = Field(description=(
        "An expression over the event whose value names the incident, e.g. "
        "'payload.labels.alertname' or '[payload.service, payload.check]': an event with a "
        "new value opens an incident and starts a run; more while it is open only count an "
        "occurrence."))
    reopen_window: Annotated[float, Field(ge=0, description=(
        "Seconds after an incident closed in which a matching event reopens it (a new "
        "generation and a new run); 0: such an event opens a new incident instead."))] = 0.0
    recovered_when: str | None = Field(default=None, description=(
        "An expression that marks the open incident of the event's fingerprint recovered, "
        "e.g. 'payload.status == \"resolved\"'."))
    history_size: Annotated[int, Field(ge=1, le=1000, description=(
        "Payloads kept per incident (the newest)."))] = 20
    triggers: list[str] = Field(default_factory=lambda: ["webhook", "event"], description=(
        "The trigger types whose events go through the incident lifecycle."))

    @field_validator("fingerprint", "recovered_when")
    @classmethod
    def _compiles(cls, value: str | None, info: ValidationInfo) -> str | None:
        if value is not None:
            try:
                compile_filter(value, bare_names=False)  # a typo is an error here
            except FilterError as exc:
                raise ValueError(_located(str(info.field_name), exc)) from None
        return value

    @field_validator("triggers")
    @classmethod
    def _known_types(cls, value: list[str]) -> list[str]:
        unknown = [kind for kind in value if kind not in TRIGGER_TYPES]
        if unknown:
            raise ValueError(f"unknown trigger type(s) {', '.join(map(repr, unknown))}; "
                             f"choose from {', '.join(TRIGGER_TYPES)}")
        if not value:
            raise ValueError("an empty list never opens an incident; leave 'triggers' out "
                             "(webhook and event) or name the trigger types")
        return value


def _located(name: str, exc: FilterError) -> str:
    where = f"column {exc.column}" if exc.line == 1 else f"line {exc.line} column {exc.column}"
    return f"{name} {where}: {exc.reason}"
