"""The data format of a scripted (offline, deterministic) model."""

from __future__ import annotations

from typing import Annotated, Any, Literal, TypeVar

from pydantic import ConfigDict, Field, model_validator

from runtime_core.strict import StrictModel


class _Strict(StrictModel):
    model_config = ConfigDict(populate_by_name=True)


class ScriptedToolCall(_Strict):
    """One tool call a scripted turn makes."""

    name: str = Field(description="The tool's name, as the process offers it.")
    args: dict[str, Any] = Field(default_factory=dict, description=(
        "The call's arguments; a string '$payload.a.b', '$payload', '$event_id' or '$run_id' "
        "is replaced by that value of the run's event."))


class ResultBranch(_Strict):
    """Where a run goes after a tool-call turn, by what the tools answered."""

    contains: str = Field(min_length=1, description=(
        "Text to look for (any case) in the results of the turn's tool calls, as the model "
        "receives them (a reconciled write reads 'not applied: ...' or 'failed: ...')."))
    script: str = Field(description=(
        "The named script (under scripts) the run plays from then on, from its first turn."))


class ScriptTurn(_Strict):
    """One model turn: a reply, tool calls, or an error; optionally after a delay.

    ``repeat`` plays the same turn several times in a row (``"forever"`` never moves on), which is
    how a demo agent gets stuck in a loop.
    """

    reply: str | None = Field(default=None, description="The final answer: the run ends with it.")
    tool_calls: list[ScriptedToolCall] | None = Field(default=None, description=(
        "Tools to call; their results go back to the model, and the run asks for the next "
        "turn."))
    raise_: str | None = Field(default=None, alias="raise", description=(
        "Fail the model call with this message (a model error: the run fails, or retries)."))
    sleep: Annotated[float, Field(ge=0)] | None = Field(default=None, description=(
        "Seconds to wait before the turn; a turn with only sleep waits before the next one."))
    repeat: Annotated[int, Field(ge=1)] | Literal["forever"] = Field(default=1, description=(
        "Play the turn this many times in a row; 'forever' never moves on."))
    on_result: list[ResultBranch] = Field(default_factory=list, description=(
        "With tool_calls: branches checked in order once the calls have answered; the "
        "first whose text is in a result switches the run to its script. None matching: the "
        "script goes on with its next turn."))

    @model_validator(mode="after")
    def _one_action(self) -> ScriptTurn:
        actions = [n for n in ("reply", "tool_calls", "raise_") if getattr(self, n) is not None]
        if len(actions) > 1:
            names = ", ".join("raise" if a == "raise_" else a for a in actions)
            raise ValueError(f"a turn has one of reply, tool_calls or raise, not {names}")
        if not actions and self.sleep is None:
            raise ValueError("a turn needs reply, tool_calls, raise or sleep")
        if self.on_result and self.tool_calls is None:
            raise ValueError("on_result goes with tool_calls: it looks at their results")
        return self


class ScriptSelect(_Strict):
    """How a run picks its script: a payload field naming it, else the trigger type."""

    by_payload_field: str | None = Field(default=None, description=(
        "A dotted payload field (e.g. 'kind' or 'alert.type') whose value names the script."))
    by_trigger_type: dict[str, str] = Field(default_factory=dict, description=(
        "Trigger type -> script name. Without a match, a script named like the trigger type, "
        "else the default script (turns)."))


class ModelPrice(_Strict):
    """What a model's tokens cost, per million: each model call's cost is journaled with its
    usage (``cost`` in the model_usage entry), so Pulse and the journal can add it up. Take
    the figures from your provider's price list; promptui knows no prices of its own."""

    input_per_million: Annotated[float, Field(ge=0, description=(
        "The price of a million input (prompt) tokens, in your currency."))] = 0.0
    output_per_million: Annotated[float, Field(ge=0, description=(
        "The price of a million output (completion) tokens, in your currency."))] = 0.0

    def cost(self, input_tokens: int, output_tokens: int) -> float:
        """The cost of one call's tokens."""
        return (input_tokens * self.input_per_million
                + output_tokens * self.output_per_million) / 1_000_000


class ScriptedModelSpec(_Strict):
    """An offline, deterministic model that plays a script: the mapping form of
    ``model: scripted:<file>`` (the file holds the same keys). Each run plays its script from
    the first turn."""

    provider: Literal["scripted"] = Field(default="scripted", description="Always 'scripted'.")
    turns: list[ScriptTurn] = Field(default_factory=list, description=(
        "The default script: the turns every run plays in order, one per model call."))
    scripts: dict[str, list[ScriptTurn]] = Field(default_factory=dict, description=(
        "Named scripts, picked per run by select."))
    select: ScriptSelect = Field(default_factory=ScriptSelect, description=(
        "How a run picks one of scripts."))
    price: ModelPrice | None = Field(default=None, description=(
        "What its tokens cost, per million (for a demo: the scripted model's token counts "
        "are estimates); each call's cost is journaled."))

    @model_validator(mode="after")
    def _check_scripts(self) -> ScriptedModelSpec:
        if not self.turns and not self.scripts:
            raise ValueError("a scripted model needs 'turns' or 'scripts'")
        known = sorted(self.scripts) or ["(none)"]
        for where, turns in [("turns", self.turns), *((f"scripts.{k}", v)
                                                      for k, v in self.scripts.items())]:
            for index, turn in enumerate(turns):
                for branch in turn.on_result:
                    if branch.script not in self.scripts:
                        raise ValueError(
                            f"{where}[{index}].on_result names script {branch.script!r}, "
                            f"which is not in scripts: {', '.join(known)}")
        for trigger_type, name in self.select.by_trigger_type.items():
            if name not in self.scripts:
                known = sorted(self.scripts) or ["(none)"]
                raise ValueError(
                    f"select.by_trigger_type.{trigger_type} names script {name!r}, "
                    f"which is not in scripts: {', '.join(known)}"
                )
        return self


class RemoteModelSpec(_Strict):
    """The mapping form of a remote model: an OpenAI-compatible one (vLLM, llama.cpp servers,
    a proxy...) or Anthropic's Messages API."""

    provider: Literal["openai", "ollama", "anthropic"] = Field(description=(
        "openai: any OpenAI-compatible server (OpenAI, vLLM, llama.cpp, a proxy); ollama; "
        "anthropic: the Messages API."))
    name: Annotated[str, Field(min_length=1)] = Field(description=(
        "The model's name on that server, e.g. 'gpt-4o-mini' or 'llama3.1'."))
    # default: OPENAI_BASE_URL / OLLAMA_HOST / ANTHROPIC_BASE_URL, or the public API
    base_url: str | None = Field(default=None, description=(
        "The server's URL; default: OPENAI_BASE_URL, OLLAMA_HOST or ANTHROPIC_BASE_URL, else "
        "the provider's public API."))
    # default: OPENAI_API_KEY for OpenAI's own API (none for your own server), ANTHROPIC_API_KEY
    api_key_env: str | None = Field(default=None, description=(
        "The environment variable holding the API key (the key itself never goes in a "
        "manifest); default: OPENAI_API_KEY for OpenAI's API, ANTHROPIC_API_KEY."))
    timeout: Annotated[float, Field(gt=0, le=600, description=(
        "Seconds one model call may take."))] = 60.0
    max_retries: Annotated[int, Field(ge=0, le=10, description=(
        "Retries of a call that failed on the way (a timeout, a 429 or 5xx), with "
        "backoff."))] = 3
    # anthropic only (the API requires it): the longest reply, in tokens; default 4096
    max_tokens: Annotated[int, Field(ge=1, le=1_000_000)] | None = Field(default=None, description=(
        "Anthropic only (its API requires it): the longest reply, in tokens; default 4096."))
    # send the images tools return to the model (false: a model without vision)
    images: bool = Field(default=True, description=(
        "Send the images tools return to the model; false for a model without vision."))
    price: ModelPrice | None = Field(default=None, description=(
        "What its tokens cost, per million, from your provider's price list; each call's "
        "cost is journaled with its usage."))

    @model_validator(mode="after")
    def _url_shape(self) -> RemoteModelSpec:
        if self.base_url is not None and not self.base_url.startswith(("http://", "https://")):
            raise ValueError(f"base_url {self.base_url!r} must start with http:// or https://")
        if self.max_tokens is not None and self.provider != "anthropic":
            # never silently ignored: the OpenAI-compatible adapter does not send it
            raise ValueError(f"max_tokens applies to provider anthropic, not {self.provider}")
        return self


#: The providers of the string form ``<provider>:<model>`` that reach a remote model.
REMOTE_PROVIDERS = ("openai", "ollama", "anthropic")

_Setting = TypeVar("_Setting")

MODEL_STRING_HELP = (
    "use 'echo' (offline, replies with a summary of the event), "
    "'scripted:<path to a YAML script>', 'openai:<model>' (OPENAI_API_KEY, OPENAI_BASE_URL), "
    "'ollama:<model>' (OLLAMA_HOST) or 'anthropic:<model>' (ANTHROPIC_API_KEY, "
    "ANTHROPIC_BASE_URL)"
)


def check_model_setting(value: _Setting) -> _Setting:
    """Refuse a model string no adapter can build (a ValueError names the choices); any other
    setting (a mapping's spec, a model object) is returned as is."""
    if isinstance(value, str):
        provider, sep, rest = value.partition(":")
        if value == "echo" or (provider in (*REMOTE_PROVIDERS, "scripted") and sep
                                and rest.strip()):
            return value
        raise ValueError(f"unknown model {value!r}: {MODEL_STRING_HELP}")
    return value
