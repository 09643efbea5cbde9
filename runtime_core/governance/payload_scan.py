"""A cheap, offline prompt-injection scan of trigger payloads (``scan_payloads``).

It looks at every string in a payload (keys included) for the phrasings injection attempts use.
It is a tripwire, not a guarantee: payloads are also always fenced as untrusted in the prompt."""

from __future__ import annotations

import re
from typing import Any

_PATTERNS: tuple[tuple[str, str], ...] = (
    ("override_instructions",
     r"\b(ignore|disregard|forget|override)\b[^.\n]{0,40}\b(previous|prior|above|earlier|all|"
     r"your|system)\b[^.\n]{0,20}\b(instructions?|prompts?|rules?|directives?)"),
    ("role_hijack", r"\byou are (now|no longer)\b|\bact as (an? )?(unrestricted|jailbroken)"),
    ("prompt_exfiltration",
     r"\b(reveal|print|show|repeat|leak)\b[^.\n]{0,30}\b(system prompt|instructions|secrets?|"
     r"api keys?)\b"),
    ("fake_delimiters", r"<\|?(im_start|im_end|system|endoftext)\|?>|\[/?(INST|SYS)\]"),
    ("tool_coercion", r"\b(call|run|execute|invoke)\b[^.\n]{0,20}\btool\b[^.\n]{0,40}"
                      r"\b(immediately|now|without (asking|checking))"),
)
_COMPILED = tuple((name, re.compile(pattern, re.IGNORECASE)) for name, pattern in _PATTERNS)


def _strings(value: Any, budget: list[int]) -> list[str]:
    out: list[str] = []
    stack = [value]
    while stack and budget[0] > 0:
        item = stack.pop()
        if isinstance(item, str):
            out.append(item[: budget[0]])
            budget[0] -= len(item)
        elif isinstance(item, dict):
            stack.extend(str(k) for k in item)
            stack.extend(item.values())
        elif isinstance(item, list | tuple):
            stack.extend(item)
    return out


def scan_payload(payload: Any, max_chars: int = 20_000) -> list[str]:
    """The sorted names of the patterns found (empty when the payload looks clean)."""
    found: set[str] = set()
    for text in _strings(payload, [max_chars]):
        for name, pattern in _COMPILED:
            if name not in found and pattern.search(text):
                found.add(name)
    return sorted(found)
