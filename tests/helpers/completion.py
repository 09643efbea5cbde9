"""A deployer under a completion contract: a write that dispatches a pipeline, a read that checks
it (and verifies the dispatch when the pipeline succeeded), and a tool that declares a
solution. ``PIPELINE_STATUS`` is what the check reads: a test may change it (and put it back)."""

from __future__ import annotations

from typing import Any

from runtime_core import ProcessConfig, ToolContext, tool

PIPELINE_STATUS = {"status": "success"}


def dispatch_pipeline(branch: str, ctx: ToolContext) -> str:
    """Start the deploy pipeline (an action with an outside effect)."""
    return f"pipeline dispatched for {branch}"


def check_pipeline(branch: str) -> dict[str, str]:
    """Read the pipeline's status."""
    return dict(PIPELINE_STATUS)


def write_solution(text: str, ctx: ToolContext) -> str:
    """Declare a solution artifact."""
    ctx.artifact("solution", {"text": text})
    return "saved"


TOOLS = [tool(dispatch_pipeline, effect="write"), tool(check_pipeline, effect="read"),
         tool(write_solution, effect="read")]
DISPATCH = {"tool_calls": [{"name": "dispatch_pipeline", "args": {"branch": "main"}}]}
CHECK = {"tool_calls": [{"name": "check_pipeline", "args": {"branch": "main"}}]}
VERIFY_RULE = {"tool": "check_pipeline", "verifies": "dispatch_pipeline",
               "passed": "result.status == 'success'"}


def config(*turns: dict[str, Any], evaluator: str = "action_with_verification",
           journal: dict[str, Any] | None = None, **extra: Any) -> ProcessConfig:
    return ProcessConfig(
        model={"provider": "scripted", "turns": list(turns)},
        profile={"name": "deployer", "version": "3",
                 "completion": {"evaluator": evaluator, "verifications": [VERIFY_RULE]}},
        journal=journal or {"level": "full", "backend": "memory"}, **extra)
