"""A process's configuration as it is now, written as a manifest: the config it was made with,
plus what changed live (its instructions, the config triggers added or removed since; the
triggers the agent added itself in open mode are not part of it). Credentials are written as
``${VAR}`` references (manifest/save.py), and the text goes through the process's redaction, so no
secret value leaves this way."""

from __future__ import annotations

from runtime_core.config import ProcessConfig
from runtime_core.control import redaction
from runtime_core.control.plane import ControlError
from runtime_core.manifest.save import manifest_text
from runtime_core.process.process import AgentProcess


def live_config(process: AgentProcess) -> ProcessConfig:
    """The process's configuration now, changes made while it ran included."""
    triggers = [t.config for t in process.status_snapshot().triggers
                if t.source == "config" and t.config is not None]
    return process.config.model_copy(update={"triggers": triggers,
                                             "instructions": process.instructions})


def process_manifest(process: AgentProcess, name: str) -> str:
    """``process``'s configuration as a manifest's text; ControlError (NOT_SAVABLE) when a
    manifest cannot hold it (a model given as a Python object)."""
    try:
        text = manifest_text(live_config(process), name)
    except ValueError as exc:
        raise ControlError(str(exc), "NOT_SAVABLE") from None
    return redaction.redactor(process)(text)
