"""TriggerConfig: one trigger of a process, checked as a whole when it loads.

Every check runs here, in the model: the fields of its type, the cron expression and time zone,
the webhook path and the filter expression. So a mistake is reported with the manifest, whatever
modules happen to be imported, and never first when the trigger fires."""

from __future__ import annotations

from typing import Annotated

from pydantic import Field, SecretStr, model_validator

from runtime_core.strict import StrictModel
from runtime_core.triggers.cron import validate_cron
from runtime_core.triggers.filters import compile_filter

HEALTH_PATH = "/health"  # the webhook server's own health check

TRIGGER_TYPES = ("cron", "interval", "webhook", "file_watch", "event", "message", "manual")
FILE_WATCH_CHANGES = ("added", "modified", "deleted")

#: Which fields each trigger type uses (besides type and filter_expression).
TRIGGER_FIELDS: dict[str, tuple[str, ...]] = {
    "cron": ("cron_expression", "timezone"),
    "interval": ("seconds",),
    "webhook": ("webhook_path", "webhook_port", "webhook_host", "hmac_secret",
                "signature_tolerance", "max_body_bytes"),
    "file_watch": ("watch_path", "patterns", "recursive", "debounce", "watch_events"),
    "event": ("event_type", "event_source"),
    "message": ("topic",),
    "manual": (),
}
_REQUIRED = {"cron": "cron_expression", "interval": "seconds", "file_watch": "watch_path",
             "event": "event_type", "message": "topic"}


class TriggerConfig(StrictModel):
    """One trigger. Only the fields of the trigger type named in ``type`` may be set."""

    type: str
    filter_expression: str | None = None
    # cron
    cron_expression: str | None = None
    timezone: str | None = None
    # interval
    seconds: Annotated[float, Field(gt=0)] | None = None
    # webhook
    webhook_path: str = "/webhook"
    webhook_port: Annotated[int, Field(ge=0, le=65535)] = 9090
    webhook_host: str = "127.0.0.1"
    hmac_secret: SecretStr | None = None
    signature_tolerance: Annotated[int, Field(gt=0)] = 300
    max_body_bytes: Annotated[int, Field(gt=0)] = 1_048_576
    # file_watch
    watch_path: str | None = None
    patterns: list[str] = Field(default_factory=lambda: ["*"])
    recursive: bool = True
    debounce: Annotated[float, Field(ge=0)] = 0.5
    watch_events: list[str] = Field(default_factory=lambda: list(FILE_WATCH_CHANGES))
    # event / message
    event_type: str | None = None
    event_source: str | None = None
    topic: str | None = None

    @model_validator(mode="after")
    def _check_type_and_fields(self) -> TriggerConfig:
        if self.type not in TRIGGER_TYPES:
            raise ValueError(
                f"unknown trigger type {self.type!r}; choose from {', '.join(TRIGGER_TYPES)}"
            )
        allowed = set(TRIGGER_FIELDS[self.type]) | {"type", "filter_expression"}
        stray = sorted(set(self.model_fields_set) - allowed)
        if stray:
            valid = ", ".join(sorted(allowed))
            raise ValueError(
                f"{', '.join(stray)} does not apply to a '{self.type}' trigger "
                f"(its fields: {valid})"
            )
        needed = _REQUIRED.get(self.type)
        if needed is not None and getattr(self, needed) is None:
            raise ValueError(f"a '{self.type}' trigger needs '{needed}'")
        unknown = sorted(set(self.watch_events) - set(FILE_WATCH_CHANGES))
        if unknown:
            raise ValueError(
                f"unknown watch_events {unknown}; choose from {list(FILE_WATCH_CHANGES)}"
            )
        if self.type == "webhook":
            check_webhook_path(self.webhook_path)
        if self.type == "cron" and self.cron_expression is not None:
            validate_cron(self.cron_expression, self.timezone)
        if self.filter_expression:  # an empty string means "no filter"
            compile_filter(self.filter_expression)
        return self


def check_webhook_path(path: str) -> None:
    if not path.startswith("/"):
        raise ValueError(f"webhook_path must start with '/', got {path!r}")
    if path == HEALTH_PATH:
        raise ValueError(f"webhook_path {HEALTH_PATH!r} is reserved for the health check")
    if any(char in path for char in "?#") or any(char.isspace() for char in path):
        raise ValueError(
            f"webhook_path {path!r} must be a plain path (no '?', '#' or whitespace)"
        )
