"""How a process names its MCP servers: ``servers: {name: {type: stdio | http, ...}}``.

Pure configuration (no ``mcp`` import): a manifest is checked without loading the SDK. Values that
may hold credentials (``env``, ``headers``, ``bearer_token``) can be ``${VAR}`` references,
resolved when the server is connected, so the value never sits in the config, the journal or on
screen.
"""

from __future__ import annotations

import os
import re
import shutil
import sys
from pathlib import Path
from typing import Annotated, Literal
from urllib.parse import urlsplit

from pydantic import ConfigDict, Field, model_validator

from runtime_core.strict import StrictModel

SERVER_NAME = re.compile(r"^[A-Za-z][A-Za-z0-9_-]{0,63}$")
TOOL_PREFIX = re.compile(r"^[A-Za-z0-9_-]{0,32}$")
REFERENCE = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)(?::-([^}]*))?\}")
#: Commands that mean "the Python promptui runs on", so a server beside a manifest sees the same
#: installed packages without an activated virtualenv.
PYTHON_COMMANDS = ("python", "python3")
REDACTED = "[redacted]"


class _Strict(StrictModel):
    model_config = ConfigDict(frozen=True)


class _ServerBase(_Strict):
    timeout: Annotated[float, Field(gt=0, le=300, description=(
        "Seconds to connect and list the server's tools."))] = 15.0
    # One tool call, waiting for a lost link to come back included. A write that times out
    # parks its run (its outcome is unknown); a read is reported interrupted.
    call_timeout: Annotated[float, Field(gt=0, le=86_400, description=(
        "Seconds one tool call may take (waiting for a lost link included); a write that "
        "times out parks its run (outcome unknown), a read is reported interrupted."))] = 60.0
    tool_prefix: str = Field(default="", description=(
        "Prepended to every tool name of the server, to keep two servers' tools apart (up to "
        "32 letters, digits, '_' or '-')."))
    # A server may ask the operator a question during a tool call (elicitation/create); the run
    # waits for the answer, up to elicitation_timeout, then the answer is "cancel". False: the
    # capability is not declared, so the server does not ask.
    elicitation: bool = Field(default=True, description=(
        "Let the server ask the operator a question during a tool call (the run waits for "
        "the answer); false: the capability is not declared."))
    elicitation_timeout: Annotated[float, Field(gt=0, le=86_400, description=(
        "Seconds a question waits for its answer; then the answer is 'cancel'."))] = 600.0
    # A server may ask the process's own model for a completion (sampling/createMessage),
    # counted against the run's model-call budget. False: the capability is not declared.
    sampling: bool = Field(default=True, description=(
        "Let the server ask the process's model for a completion (counted against the run's "
        "model calls); false: the capability is not declared."))

    @model_validator(mode="after")
    def _prefix_shape(self) -> _ServerBase:
        if not TOOL_PREFIX.match(self.tool_prefix):
            raise ValueError("tool_prefix is up to 32 letters, digits, '_' or '-'")
        return self


class StdioServerConfig(_ServerBase):
    """A server the runtime starts as a child process and talks to over stdin/stdout."""

    type: Literal["stdio"] = Field(default="stdio", description=(
        "stdio (may be left out when command is given)."))
    command: Annotated[str, Field(min_length=1)] = Field(description=(
        "The program to start, e.g. 'npx' or 'python' (the Python promptui runs on)."))
    args: list[str] = Field(default_factory=list, description="Its arguments.")
    env: dict[str, str] = Field(default_factory=dict, description=(
        "Environment variables added to a minimal safe environment; ${VAR} references are "
        "read when the server starts."))
    cwd: str | None = Field(default=None, description=(
        "The folder it starts in; default: the folder the runtime runs in."))


class HttpServerConfig(_ServerBase):
    """A server reached over MCP streamable HTTP."""

    type: Literal["http"] = Field(description="http (may be left out when url is given).")
    url: Annotated[str, Field(min_length=1)] = Field(description=(
        "The server's MCP endpoint, e.g. http://127.0.0.1:8000/mcp."))
    headers: dict[str, str] = Field(default_factory=dict, description=(
        "HTTP headers sent with every request; ${VAR} references are read when it "
        "connects."))
    bearer_token: str | None = Field(default=None, description=(
        "Sent as 'Authorization: Bearer <token>'; write it as a ${VAR} reference."))

    @model_validator(mode="after")
    def _url_shape(self) -> HttpServerConfig:
        parts = urlsplit(self.url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ValueError(f"url {self.url!r} must be http:// or https:// with a host, e.g. "
                             "http://127.0.0.1:8000/mcp")
        return self


ServerConfig = Annotated[StdioServerConfig | HttpServerConfig, Field(discriminator="type")]


def _default_type(value: object) -> object:
    """``type`` may be left out when the entry's shape says it (``command`` or ``url``)."""
    if isinstance(value, dict) and "type" not in value:
        if "command" in value:
            return {**value, "type": "stdio"}
        if "url" in value:
            return {**value, "type": "http"}
    return value


def normalise_server_entries(value: object) -> object:
    if isinstance(value, dict):
        return {key: _default_type(entry) for key, entry in value.items()}
    return value


def resolve_references(text: str, where: str) -> str:
    """Expand ``${VAR}`` / ``${VAR:-default}`` from the environment, or say which is missing."""

    def replace(match: re.Match[str]) -> str:
        name, default = match.group(1), match.group(2)
        if name in os.environ:
            return os.environ[name]
        if default is not None:
            return default
        raise ValueError(f"{where} needs environment variable {name}, which is not set")

    return REFERENCE.sub(replace, text)


def missing_references(config: StdioServerConfig | HttpServerConfig) -> list[str]:
    """The ``${VAR}`` references (without default) whose variable is not set right now."""
    texts = [*config.env.values()] if isinstance(config, StdioServerConfig) else [
        *config.headers.values(), config.bearer_token or ""]
    missing: list[str] = []
    for text in texts:
        for match in REFERENCE.finditer(text):
            if match.group(1) not in os.environ and match.group(2) is None:
                missing.append(match.group(1))
    return missing


def resolve_command(command: str, base_dir: Path | None) -> str:
    """The program to start: ``python`` is this interpreter; a path is taken relative to the
    manifest's folder; a bare name is looked up on PATH."""
    if command in PYTHON_COMMANDS:
        return sys.executable
    if os.sep in command or (os.altsep and os.altsep in command):
        path = Path(command).expanduser()
        if not path.is_absolute() and base_dir is not None:
            path = base_dir / path
        return str(path)
    found = shutil.which(command)
    return found or command


def check_server(name: str, config: StdioServerConfig | HttpServerConfig,
                 base_dir: Path | None) -> None:
    """Raise ``ValueError`` naming the server if this entry cannot be used as written."""
    if not SERVER_NAME.match(name):
        raise ValueError(f"server name {name!r}: use a letter, then letters, digits, '-' or '_'")
    if isinstance(config, StdioServerConfig):
        program = resolve_command(config.command, base_dir)
        if not (Path(program).is_file() and os.access(program, os.X_OK)):
            raise ValueError(f"server {name!r}: command {config.command!r} is not an executable "
                             "file and is not on PATH; give a full path or install it")
        if config.cwd is not None:
            cwd = Path(config.cwd).expanduser()
            if not cwd.is_absolute() and base_dir is not None:
                cwd = base_dir / cwd
            if not cwd.is_dir():
                raise ValueError(f"server {name!r}: cwd {config.cwd!r} is not a folder")


def stdio_cwd(config: StdioServerConfig, base_dir: Path | None) -> str | None:
    if config.cwd is None:
        return None
    cwd = Path(config.cwd).expanduser()
    if not cwd.is_absolute() and base_dir is not None:
        cwd = base_dir / cwd
    return str(cwd)


def redacted_server(config: StdioServerConfig | HttpServerConfig) -> dict[str, object]:
    """The entry as it may be shown: ``${VAR}`` references stay, literal credentials do not."""

    def shown(text: str) -> str:
        return text if REFERENCE.fullmatch(text) else REDACTED

    data = config.model_dump(mode="json", exclude_defaults=True)
    data["type"] = config.type
    if isinstance(config, StdioServerConfig) and config.env:
        data["env"] = {key: shown(value) for key, value in config.env.items()}
    if isinstance(config, HttpServerConfig):
        if config.headers:
            data["headers"] = {key: shown(value) for key, value in config.headers.items()}
        if config.bearer_token is not None:
            data["bearer_token"] = shown(config.bearer_token)
    return data
