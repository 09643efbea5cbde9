"""The base of the runtime's errors, under the reference runtime's name: ``except
RuntimeBaseError`` catches every error the runtime raises about itself (a state that does not allow
a call, a manifest, the journal, a trigger, the control plane, a budget), whatever built-in kind
each one also is (StateError is a ValueError, JournalError a RuntimeError)."""

from __future__ import annotations


class RuntimeBaseError(RuntimeError):
    """Base class of the runtime's own errors."""
