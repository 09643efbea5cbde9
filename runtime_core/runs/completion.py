"""Completion contracts: a run succeeds only on the evidence its profile requires.

Evidence is artifacts, durable journal records written in the same entry as the tool result that
produced them (or the operator's evidence entry):

- ``action``: every write tool that returned successfully (id ``run_id:step``, its idempotency key);
- ``verification``: made by a verification rule from a later read's result, or declared by a tool
  (``ctx.artifact``) or supplied by an operator; it links to the action it verifies;
- ``solution`` or any other kind a tool declares with ``ctx.artifact(kind, data)``.

Evaluators: ``final_reply`` (the default without a profile: any final response completes),
``solution``, ``action_with_verification`` and user callables named ``package.module:function``.
"""

from __future__ import annotations

import importlib
import json
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Annotated, Any

from pydantic import ConfigDict, Field, field_validator

from runtime_core.strict import StrictModel
from runtime_core.triggers.base import TriggerEvent

MISSING_COMPLETION_EVIDENCE = "missing_completion_evidence"


class _Strict(StrictModel):
    model_config = ConfigDict(frozen=True)


class VerificationRule(_Strict):
    """A read whose result verifies the latest earlier action of ``verifies``."""

    tool: Annotated[str, Field(min_length=1)] = Field(description=(
        "The read tool whose result verifies."))
    # an action tool's name, or any write
    verifies: Annotated[str, Field(min_length=1)] = Field(default="*", description=(
        "The action tool it verifies (its latest earlier successful call); '*': any write."))
    passed: str = Field(default="true", description=(
        "An expression over result (the read's parsed result) that must hold, e.g. "
        "'result.status == \"success\"'."))

    @field_validator("passed")
    @classmethod
    def _compiles(cls, value: str) -> str:
        from runtime_core.triggers.filters.expression import compile_filter  # it imports config

        compile_filter(value, root="result")
        return value


class CompletionConfig(_Strict):
    """A profile's completion contract: the evidence a run needs to succeed. Without it the
    run waits (missing completion evidence) for an operator to supply it."""

    evaluator: Annotated[str, Field(min_length=1)] = Field(default="solution", description=(
        "final_reply (any final answer completes), solution (a solution artifact a tool "
        "declared), action_with_verification (an action and a verification linked to it), a "
        "name given to register_evaluator, or 'package.module:function'."))
    actions: list[str] = Field(default_factory=list, description=(
        "The write tools whose calls count as actions; empty: any write."))
    verifications: list[VerificationRule] = Field(default_factory=list, description=(
        "Reads whose results verify an action."))

    @field_validator("evaluator")
    @classmethod
    def _known(cls, value: str) -> str:
        if value not in EVALUATORS and ":" not in value:
            known = ", ".join(sorted(EVALUATORS))
            raise ValueError(f"unknown completion evaluator {value!r}: use one of {known}, or "
                             "'package.module:function' for your own")
        return value


class ProfileConfig(_Strict):
    """What a run executes: a named, versioned profile and its completion contract."""

    name: str | None = Field(default=None, description=(
        "The profile's name; default: the process name."))
    version: str | None = Field(default=None, description=(
        "Its version; default: a digest of the effective configuration (a change of "
        "configuration is a new version)."))
    completion: CompletionConfig = Field(default_factory=CompletionConfig, description=(
        "The evidence a run needs to succeed."))


@dataclass(frozen=True, slots=True)
class Artifact:
    artifact_id: str
    kind: str
    step: int
    tool: str = ""
    data: Any = None
    links: tuple[str, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        """The journal's form; no links are left out (``from_dict``'s default)."""
        out = {"artifact_id": self.artifact_id, "kind": self.kind, "step": self.step,
               "tool": self.tool, "data": self.data}
        if self.links:
            out["links"] = list(self.links)
        return out

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Artifact:
        return cls(str(data.get("artifact_id", "")), str(data.get("kind", "")),
                   int(data.get("step", 0)), str(data.get("tool", "")), data.get("data"),
                   tuple(str(x) for x in data.get("links") or ()))


@dataclass(frozen=True, slots=True)
class CompletionEvidence:
    """What a completion evaluator judges a run by: its final ``reply`` and the
    ``artifacts`` it made (actions, verifications, solutions...), with the profile's
    completion settings."""

    run_id: str
    reply: str
    artifacts: tuple[Artifact, ...]
    config: CompletionConfig = field(default_factory=CompletionConfig)

    def actions(self) -> list[Artifact]:
        wanted = set(self.config.actions)
        return [a for a in self.artifacts
                if a.kind == "action" and (not wanted or a.tool in wanted)]


@dataclass(frozen=True, slots=True)
class CompletionVerdict:
    """A completion evaluator's answer: ``satisfied``, or what evidence is ``missing`` (shown
    to the operator while the run waits for it)."""

    satisfied: bool
    missing: str = ""  # what evidence is missing, for the operator


Evaluator = Callable[[CompletionEvidence], CompletionVerdict]


def final_reply(evidence: CompletionEvidence) -> CompletionVerdict:
    return CompletionVerdict(True)


def solution(evidence: CompletionEvidence) -> CompletionVerdict:
    if evidence.reply.strip() or any(a.kind == "solution" for a in evidence.artifacts):
        return CompletionVerdict(True)
    return CompletionVerdict(False, "no solution: the final reply is empty and no tool declared "
                                    "a solution artifact")


def action_with_verification(evidence: CompletionEvidence) -> CompletionVerdict:
    actions = evidence.actions()
    if not actions:
        which = ", ".join(evidence.config.actions) or "any write tool"
        return CompletionVerdict(False, f"no action was observed ({which}); dispatching "
                                        "nothing is not success")
    latest = actions[-1]
    linked = [a for a in evidence.artifacts
              if a.kind == "verification" and latest.artifact_id in a.links]
    fresh = [a for a in linked if a.step > latest.step]
    if any(_passed(a) for a in fresh):
        return CompletionVerdict(True)
    if fresh:
        return CompletionVerdict(False, f"the verification of {latest.tool} "
                                        f"({latest.artifact_id}) did not pass")
    older = [a for a in evidence.artifacts if a.kind == "verification" and a not in linked]
    hint = " (a verification exists, but for an earlier action)" if older else ""
    return CompletionVerdict(False, f"action {latest.tool} ({latest.artifact_id}) has no "
                                    f"verification linked to it{hint}")


def _passed(artifact: Artifact) -> bool:
    data = artifact.data
    return bool(data.get("passed", True)) if isinstance(data, dict) else True


EVALUATORS: dict[str, Evaluator] = {
    "final_reply": final_reply,
    "solution": solution,
    "action_with_verification": action_with_verification,
}


def register_evaluator(name: str, evaluator: Evaluator) -> None:
    """Make ``name`` usable as ``profile.completion.evaluator``."""
    EVALUATORS[name] = evaluator


def resolve_evaluator(name: str) -> Evaluator:
    if name in EVALUATORS:
        return EVALUATORS[name]
    module_name, _, attr = name.partition(":")
    try:
        target: Any = importlib.import_module(module_name)
        for part in attr.split("."):
            target = getattr(target, part)
    except (ImportError, AttributeError) as exc:
        raise ValueError(f"completion evaluator {name!r} cannot be imported: {exc}") from None
    if not callable(target):
        raise ValueError(f"completion evaluator {name!r} is not callable")
    return target  # type: ignore[no-any-return]


def evaluate(evaluator: Evaluator, evidence: CompletionEvidence) -> CompletionVerdict:
    """Run an evaluator; one that raises or answers nonsense is "not satisfied", never a crash."""
    try:
        verdict: Any = evaluator(evidence)  # a user evaluator may answer a plain bool
    except Exception as exc:
        return CompletionVerdict(False, f"the completion evaluator failed: "
                                        f"{type(exc).__name__}: {exc}")
    if isinstance(verdict, CompletionVerdict):
        return verdict
    return CompletionVerdict(bool(verdict), "" if verdict else "the evaluator said no")


class Verifier:
    """Turns a verification rule's read into a verification artifact linked to its action."""

    def __init__(self, rules: list[VerificationRule]) -> None:
        from runtime_core.triggers.filters.expression import compile_filter

        self._rules = [(rule, compile_filter(rule.passed, root="result")) for rule in rules]

    def __bool__(self) -> bool:
        return bool(self._rules)

    def artifacts_for(self, run_id: str, step: int, tool: str, result_text: str,
                      earlier: list[Artifact]) -> list[Artifact]:
        made: list[Artifact] = []
        for rule, check in self._rules:
            if rule.tool != tool:
                continue
            actions = [a for a in earlier if a.kind == "action" and a.step < step
                       and (rule.verifies == "*" or a.tool == rule.verifies)]
            if not actions:
                continue  # nothing to verify yet
            try:
                result: Any = json.loads(result_text)
            except ValueError:
                result = result_text
            passed = check.matches(TriggerEvent("verification", "verification", result))
            made.append(Artifact(f"{run_id}:{step}:v{len(made)}", "verification", step, tool,
                                 {"passed": passed, "result": result_text[:500]},
                                 (actions[-1].artifact_id,)))
        return made


class StaleEvidenceError(ValueError):
    """Evidence for an action that is no longer the run's latest one."""
