"""TriggerConfig: one trigger of a process, checked as a whole when it loads.

Every check runs here, in the model: the fields of its type, the cron expression and time zone,
the webhook path and the filter expression. So a mistake is reported with the manifest, whatever
modules happen to be imported, and never first when the trigger fires."""

from __future__ import annotations

import ipaddress
import json
import re
from collections.abc import Mapping
from typing import Annotated, Any

from pydantic import (
    Field,
    PrivateAttr,
    SecretStr,
    ValidationInfo,
    field_validator,
    model_validator,
)

from runtime_core.strict import StrictModel
from runtime_core.triggers.cron import validate_cron
from runtime_core.triggers.custom import (
    BUILTIN_TRIGGER_TYPES,
    custom_trigger_type,
    registered_trigger_types,
)
from runtime_core.triggers.filters.expression import compile_filter
from runtime_core.triggers.signing import MAX_SIGNATURE_TOLERANCE, SCHEME_NAMES, hmac_key

HEALTH_PATH = "/health"  # the webhook server's own health check

TRIGGER_TYPES = BUILTIN_TRIGGER_TYPES  # and the custom types registered (triggers.custom)
FILE_WATCH_CHANGES = ("added", "modified", "deleted")
#: The reference runtime's spellings of trigger fields -> ours (the canonical names). Either is
#: accepted; configs, dumps and docs use ours.
TRIGGER_ALIASES: dict[str, str] = {
    "cron_timezone": "timezone",
    "watch_patterns": "patterns",
    "watch_debounce_seconds": "debounce",
}
#: The reference's file_watch changes -> ours (a move is the old path deleted, the new added).
WATCH_EVENT_ALIASES: dict[str, tuple[str, ...]] = {
    "created": ("added",),
    "moved": ("added", "deleted"),
}
#: The fields of a custom (registered) trigger type.
CUSTOM_FIELDS = ("custom_config",)

#: Which fields each trigger type uses (besides type and filter_expression).
TRIGGER_FIELDS: dict[str, tuple[str, ...]] = {
    "cron": ("cron_expression", "timezone"),
    "interval": ("seconds",),
    "webhook": ("webhook_path", "webhook_port", "webhook_host", "hmac_secret",
                "signature_scheme", "signature_header", "signature_tolerance",
                "max_body_bytes", "allowed_sources"),
    "file_watch": ("watch_path", "patterns", "recursive", "debounce", "watch_events"),
    "event": ("event_type", "event_source"),
    "message": ("topic",),
    "manual": (),
}
_HEADER_NAME = re.compile(r"[A-Za-z0-9!#$%&'*+.^_`|~-]{1,100}")  # an HTTP token
_REQUIRED = {"cron": "cron_expression", "interval": "seconds", "file_watch": "watch_path",
             "event": "event_type", "message": "topic"}


class TriggerConfig(StrictModel):
    """One trigger of a process: what makes it run. Only the fields of the trigger type
    named in ``type`` may be set, and the whole trigger is checked when it loads."""

    type: str = Field(description=(
        "cron, interval, webhook, file_watch, event, message, manual, or a type registered "
        "with register_trigger_type (imported through the manifest's plugins)."))
    filter_expression: str | None = Field(default=None, description=(
        "Only events for which this expression over the event is true run, e.g. "
        "'payload.severity in [\"high\", \"critical\"]'; the others are counted as "
        "filtered (a webhook answers 200 ignored)."))
    # cron
    cron_expression: str | None = Field(default=None, description=(
        "cron: five fields, minute to weekday, e.g. '*/5 * * * *' (required)."))
    timezone: str | None = Field(default=None, description=(
        "cron: the IANA time zone the expression is read in, e.g. 'Europe/Paris'; default "
        "UTC."))
    # interval
    seconds: Annotated[float, Field(gt=0)] | None = Field(default=None, description=(
        "interval: seconds between events (required)."))
    # webhook
    webhook_path: str = Field(default="/webhook", description=(
        "webhook: the path POSTs arrive on; /health is the server's own."))
    webhook_port: Annotated[int, Field(ge=0, le=65535, description=(
        "webhook: the port; triggers on the same host and port share one server, 0 gives "
        "this one a free port of its own."))] = 9090
    webhook_host: str = Field(default="127.0.0.1", description=(
        "webhook: the address to listen on; keep it loopback behind a reverse proxy."))
    signature_scheme: str = Field(default="promptui", description=(
        "webhook: how hmac_secret is checked: promptui, github, stripe, slack or standard "
        "(Standard Webhooks)."))
    # one secret, or several while rotating (``["${NEW}", "${OLD}"]``): any of them may sign
    # (after signature_scheme: its check needs the scheme)
    hmac_secret: SecretStr | list[SecretStr] | None = Field(default=None, description=(
        "webhook: the secret the sender signs with (write it as '${VAR}'), or a list of them "
        "while rotating, any of which may sign; unsigned requests are then refused with 401."))
    signature_header: str | None = Field(default=None, description=(
        "webhook: the signature header's name, when the sender does not use the scheme's "
        "own."))
    signature_tolerance: Annotated[int, Field(gt=0, le=MAX_SIGNATURE_TOLERANCE, description=(
        "webhook: seconds a signed timestamp may be old (every scheme but github signs "
        "one); older requests are refused as replays."))] = 300
    max_body_bytes: Annotated[int, Field(gt=0, description=(
        "webhook: the largest body accepted; a larger one gets 413."))] = 1_048_576
    allowed_sources: list[str] | None = Field(default=None, description=(
        "webhook: the networks (CIDR) or addresses that may post; others get 403. Not set: "
        "anyone who can reach the port."))
    # file_watch
    watch_path: str | None = Field(default=None, description=(
        "file_watch: the folder to watch (created if missing; required)."))
    patterns: list[str] = Field(default_factory=lambda: ["*"], description=(
        "file_watch: file name patterns (fnmatch, e.g. '*.pdf') an event must match."))
    recursive: bool = Field(default=True, description="file_watch: watch the folders below too.")
    debounce: Annotated[float, Field(ge=0, description=(
        "file_watch: seconds a burst of changes is gathered for, before one event per "
        "file."))] = 0.5
    watch_events: list[str] = Field(default_factory=lambda: list(FILE_WATCH_CHANGES),
                                    description=(
        "file_watch: the changes that make events: added, modified, deleted."))
    # event / message
    event_type: str | None = Field(default=None, description=(
        "event: the event type on the runtime's bus to run on (required)."))
    event_source: str | None = Field(default=None, description=(
        "event: only events emitted by this source (a process name)."))
    topic: str | None = Field(default=None, description=(
        "message: the broker topic to run on (required)."))
    # a custom trigger type (register_trigger_type): its own settings, as JSON data
    custom_config: dict[str, Any] = Field(default_factory=dict, description=(
        "A registered custom type: its own settings, as JSON data."))
    # The ``${VAR}`` references hmac_secret was written with in a manifest (its value is read
    # when the manifest loads), so the config can be saved as a manifest without the value.
    _secret_references: tuple[str, ...] | None = PrivateAttr(default=None)

    @model_validator(mode="before")
    @classmethod
    def _reference_spellings(cls, data: Any) -> Any:
        """``cron_timezone``, ``watch_patterns``, ``watch_debounce_seconds`` (the reference
        runtime's names) mean ``timezone``, ``patterns``, ``debounce``; ``watch_events`` may
        say ``created`` (``added``) and ``moved`` (``added`` and ``deleted``)."""
        if not isinstance(data, Mapping):
            return data
        found = [alias for alias in TRIGGER_ALIASES if alias in data]
        events = data.get("watch_events")
        renamed = isinstance(events, list) and any(
            isinstance(e, str) and e in WATCH_EVENT_ALIASES for e in events)
        if not found and not renamed:
            return data
        data = dict(data)
        for alias in found:
            canonical = TRIGGER_ALIASES[alias]
            if canonical in data:
                raise ValueError(f"{alias} and {canonical} are two spellings of one field; "
                                 f"give only {canonical}")
            data[canonical] = data.pop(alias)
        if renamed:
            assert isinstance(events, list)
            spelled: list[Any] = []
            for change in events:
                for ours in WATCH_EVENT_ALIASES.get(change, (change,)) \
                        if isinstance(change, str) else (change,):
                    if ours not in spelled:
                        spelled.append(ours)
            data["watch_events"] = spelled
        return data

    # The reference runtime's attribute names, for code ported from it (read only).
    @property
    def cron_timezone(self) -> str | None:
        return self.timezone

    @property
    def watch_patterns(self) -> list[str]:
        return self.patterns

    @property
    def watch_debounce_seconds(self) -> float:
        return self.debounce

    @field_validator("custom_config")
    @classmethod
    def _json_data(cls, value: dict[str, Any]) -> dict[str, Any]:
        try:
            json.dumps(value, allow_nan=False)
        except (TypeError, ValueError) as exc:
            raise ValueError(f"custom_config must be JSON data (strings, numbers, true/false, "
                             f"null, lists and mappings): {exc}") from None
        return value

    @field_validator("hmac_secret", mode="before")
    @classmethod
    def _one_or_more_secrets(cls, value: Any) -> Any:
        # checked here so an error names the field, not each member of the union
        if value is None or isinstance(value, str | SecretStr):
            return value
        if isinstance(value, list) and all(isinstance(v, str | SecretStr) for v in value):
            return value
        raise ValueError("hmac_secret is one secret or a list of secrets (several while "
                         "rotating: [\"${NEW_SECRET}\", \"${OLD_SECRET}\"])")

    @field_validator("hmac_secret")
    @classmethod
    def _usable_secrets(cls, value: SecretStr | list[SecretStr] | None, info: ValidationInfo
                        ) -> SecretStr | list[SecretStr] | None:
        if value is None:
            return value
        secrets = value if isinstance(value, list) else [value]
        if not secrets:
            raise ValueError("hmac_secret lists no secret; leave it out for an unsigned "
                             "webhook")
        scheme = info.data.get("signature_scheme")  # absent when it was itself invalid
        for index, secret in enumerate(secrets):
            which = f"hmac_secret[{index}]" if isinstance(value, list) else "hmac_secret"
            if not secret.get_secret_value():
                raise ValueError(f"{which} is empty (an unset environment variable?)")
            if isinstance(scheme, str):
                try:
                    hmac_key(scheme, secret.get_secret_value())
                except ValueError as exc:
                    raise ValueError(f"{which}: {exc}") from None
        return value

    @field_validator("signature_scheme")
    @classmethod
    def _known_scheme(cls, value: str) -> str:
        if value not in SCHEME_NAMES:
            raise ValueError(f"unknown signature_scheme {value!r}; choose from "
                             f"{', '.join(SCHEME_NAMES)}")
        return value

    @field_validator("signature_header")
    @classmethod
    def _header_name(cls, value: str | None) -> str | None:
        if value is not None and not _HEADER_NAME.fullmatch(value):
            raise ValueError(f"signature_header {value!r} is not a header name (letters, "
                             "digits and '-')")
        return value

    @field_validator("allowed_sources")
    @classmethod
    def _networks(cls, value: list[str] | None) -> list[str] | None:
        check_sources(value)
        return value

    @model_validator(mode="after")
    def _check_type_and_fields(self) -> TriggerConfig:
        custom = self.type not in TRIGGER_TYPES
        if custom and custom_trigger_type(self.type) is None:
            raise ValueError(
                f"unknown trigger type {self.type!r}; choose from "
                f"{', '.join(registered_trigger_types())}, or register it "
                "(register_trigger_type(), imported by a module the manifest lists under "
                "plugins:)"
            )
        allowed = set(trigger_fields(self.type)) | {"type", "filter_expression"}
        stray = sorted(set(self.model_fields_set) - allowed)
        if stray:
            valid = ", ".join(sorted(allowed))
            kind = f"custom '{self.type}'" if custom else f"'{self.type}'"
            raise ValueError(
                f"{', '.join(stray)} does not apply to a {kind} trigger "
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
            stray = sorted({"signature_scheme", "signature_header"} & self.model_fields_set)
            if self.hmac_secret is None and stray:
                verb = "applies" if len(stray) == 1 else "apply"
                raise ValueError(f"{' and '.join(stray)} only {verb} with hmac_secret (the "
                                 "secret the sender signs with)")
        if self.type == "cron" and self.cron_expression is not None:
            validate_cron(self.cron_expression, self.timezone)
        if self.filter_expression:  # an empty string means "no filter"
            compile_filter(self.filter_expression)
        return self

    def remember_secret_references(self, references: list[str]) -> None:
        """Record the ``${VAR}`` text hmac_secret was written as (one per secret)."""
        self._secret_references = tuple(references)

    def secret_references(self) -> tuple[str, ...] | None:
        """The ``${VAR}`` text of each hmac_secret, when the config was read from a manifest
        that wrote them so; None otherwise."""
        refs = self._secret_references
        return refs if refs is not None and len(refs) == len(self.secrets()) else None

    def secrets(self) -> list[SecretStr]:
        """``hmac_secret`` as a list: [] when unsigned, newest first while rotating."""
        if self.hmac_secret is None:
            return []
        return self.hmac_secret if isinstance(self.hmac_secret, list) else [self.hmac_secret]


def trigger_fields(kind: str) -> tuple[str, ...]:
    """The fields a trigger of type ``kind`` uses besides type and filter_expression."""
    return TRIGGER_FIELDS.get(kind, CUSTOM_FIELDS)


def check_sources(sources: list[str] | None) -> None:
    """Each ``allowed_sources`` entry is a network (``192.30.252.0/22``) or an address."""
    if sources is None:
        return
    if not sources:
        raise ValueError("allowed_sources is empty, so nobody could post; leave it out to "
                         "allow any source")
    for source in sources:
        try:
            ipaddress.ip_network(source.strip(), strict=False)
        except ValueError:
            raise ValueError(f"allowed_sources entry {source!r} is not an IP network in CIDR "
                             "form (e.g. 192.30.252.0/22 or 2001:db8::/32) or an address"
                             ) from None


def check_webhook_path(path: str) -> None:
    if not path.startswith("/"):
        raise ValueError(f"webhook_path must start with '/', got {path!r}")
    if path == HEALTH_PATH:
        raise ValueError(f"webhook_path {HEALTH_PATH!r} is reserved for the health check")
    if any(char in path for char in "?#") or any(char.isspace() for char in path):
        raise ValueError(
            f"webhook_path {path!r} must be a plain path (no '?', '#' or whitespace)"
        )
