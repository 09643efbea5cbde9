"""How a process retries a failed run and how many dead letters it keeps in memory."""

from __future__ import annotations

from typing import Annotated

from pydantic import Field

from runtime_core.strict import StrictModel


class TriggerDeliveryConfig(StrictModel):
    """How a failed run is retried and how many dead letters are kept."""

    max_retries: Annotated[int, Field(ge=0, le=10)] = 0
    retry_backoff: Annotated[float, Field(gt=0)] = 2.0
    retry_backoff_max: Annotated[float, Field(gt=0)] = 60.0
    dead_letter_size: Annotated[int, Field(ge=0)] = 100
    scan_payloads: bool = False  # dead-letter payloads that look like prompt injection
    max_payload_chars: Annotated[int, Field(ge=200)] = 20_000
