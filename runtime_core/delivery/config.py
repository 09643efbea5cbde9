"""How a process retries a failed run and how many dead letters it keeps in memory."""

from __future__ import annotations

from typing import Annotated

from pydantic import Field

from runtime_core.strict import StrictModel


class TriggerDeliveryConfig(StrictModel):
    """How a failed run is retried and how many dead letters are kept."""

    max_retries: Annotated[int, Field(ge=0, le=10, description=(
        "Times a run that raised is tried again before its event is dead-lettered "
        "(retries exhausted) and counts as one failure."))] = 0
    retry_backoff: Annotated[float, Field(gt=0, description=(
        "Seconds before the first retry; each further retry doubles it."))] = 2.0
    retry_backoff_max: Annotated[float, Field(gt=0, description=(
        "The longest wait between retries, in seconds."))] = 60.0
    dead_letter_size: Annotated[int, Field(ge=0, description=(
        "Dead letters the process keeps in memory (the newest); the journal keeps every one "
        "until it is redelivered or cleared."))] = 100
    # dead-letter payloads that look like prompt injection
    scan_payloads: bool = Field(default=False, description=(
        "Dead-letter (flagged by payload scan) an event whose payload looks like prompt "
        "injection, without running it or counting a failure."))
    max_payload_chars: Annotated[int, Field(ge=200, description=(
        "Characters of the payload's text the scan reads."))] = 20_000
