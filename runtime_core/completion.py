"""The earlier home of completion contracts, kept so code that imports
``runtime_core.completion`` (register_evaluator, CompletionVerdict, ...) keeps working; they live
in runtime_core/runs/completion.py."""

from runtime_core.runs.completion import (
    Artifact,
    CompletionConfig,
    CompletionEvidence,
    CompletionVerdict,
    ProfileConfig,
    StaleEvidenceError,
    VerificationRule,
    register_evaluator,
    resolve_evaluator,
)

__all__ = ["Artifact", "CompletionConfig", "CompletionEvidence", "CompletionVerdict",
           "ProfileConfig", "StaleEvidenceError", "VerificationRule", "register_evaluator",
           "resolve_evaluator"]
