"""What the fake "model" answers, and which faults the fake server injects.

The model is deterministic and driven by directives in the prompt, so a test environment can
decide the right answer and the reward means something:

- ``call: NAME {json args}`` in the last user message, with a tool of that name offered and no
  tool result yet: the model calls that tool.
- after a tool result: the model answers with the tool's output verbatim.
- ``say: TEXT`` (to the end of the line): the model answers TEXT.
- otherwise it echoes the last user message.

Tokens are whitespace-separated words; their ids and logprobs are derived from the text so the
same prompt always yields the same token ids.
"""

from __future__ import annotations

import json
import random
import re
import time
import zlib
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

FAULT_TYPES = ("429", "500", "503", "drop", "timeout", "malformed")

_CALL = re.compile(r"call:\s*(\w+)\s*(\{.*\})?", re.DOTALL)
_SAY = re.compile(r"say:\s*(.*)")


@dataclass
class Reply:
    """A model turn in neutral form; each wire format renders it its own way."""

    text: str | None
    tool_call: tuple[str, dict[str, Any]] | None
    finish_reason: str  # "stop" | "length" | "tool_calls"
    prompt_words: list[str]
    completion_words: list[str]


def _text(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):  # content parts (OpenAI) or blocks (Anthropic)
        parts = []
        for part in content:
            if part.get("type") == "text":
                parts.append(part["text"])
            elif part.get("type") == "tool_result":
                parts.append(_text(part.get("content", "")))
        return "".join(parts)
    return ""


def token_id(word: str) -> int:
    return zlib.crc32(word.encode()) % 49152


def logprob(index: int, word: str) -> float:
    return -((token_id(word) + index) % 7) / 10.0


def reply(turns: list[tuple[str, Any]], tool_names: set[str], max_tokens: int | None) -> Reply:
    """Answer a conversation given as (role, content) pairs; role "tool" is a tool result."""
    prompt_words = " ".join(_text(content) for _, content in turns).split()
    role, content = turns[-1] if turns else ("user", "")
    text = _text(content)
    if role == "tool":
        return _finish(text, None, prompt_words, max_tokens)
    call = _CALL.search(text)
    if call and call.group(1) in tool_names:
        args = json.loads(call.group(2)) if call.group(2) else {}
        words = [call.group(1), *json.dumps(args).split()]
        return Reply(None, (call.group(1), args), "tool_calls", prompt_words, words)
    say = _SAY.search(text)
    return _finish(say.group(1).strip() if say else text, None, prompt_words, max_tokens)


def _finish(
    text: str,
    tool: tuple[str, dict[str, Any]] | None,
    prompt_words: list[str],
    max_tokens: int | None,
) -> Reply:
    words = text.split()
    if max_tokens is not None and len(words) > max_tokens:
        words = words[:max_tokens]
        return Reply(" ".join(words), tool, "length", prompt_words, words)
    return Reply(text, tool, "stop", prompt_words, words)


@dataclass
class FaultPlan:
    """Which fault (if any) the next request gets: a script first, then random rates.

    A script is a list of fault names (or "ok") consumed one per request in arrival order; rates
    map fault names to probabilities, drawn from a seeded RNG so runs are reproducible.
    """

    rates: dict[str, float] = field(default_factory=dict)
    script: list[str] = field(default_factory=list)
    seed: int = 0
    retry_after_s: float = 0.05
    hang_s: float = 3600.0
    latency_ms: float = 0.0
    requests: int = 0
    injected: Counter[str] = field(default_factory=Counter)
    # monotonic seconds of the first and the latest model request: a timer benchmarks share
    first_at: float | None = None
    last_at: float | None = None
    # every model request's arrival (monotonic s): where a benchmark's run lost its time
    arrivals: list[float] = field(default_factory=list)

    def __post_init__(self) -> None:
        unknown = (set(self.rates) | set(self.script)) - {*FAULT_TYPES, "ok"}
        if unknown:
            raise ValueError(f"unknown fault types {sorted(unknown)}; known: {FAULT_TYPES}")
        self._rng = random.Random(self.seed)

    def next(self) -> str | None:
        self.requests += 1
        self.last_at = time.monotonic()
        self.arrivals.append(self.last_at)
        if self.first_at is None:
            self.first_at = self.last_at
        fault: str | None = None
        if self.script:
            step = self.script.pop(0)
            fault = None if step == "ok" else step
        else:
            draw = self._rng.random()
            for name, rate in self.rates.items():
                if draw < rate:
                    fault = name
                    break
                draw -= rate
        if fault:
            self.injected[fault] += 1
        return fault

    def stats(self) -> dict[str, Any]:
        return {
            "requests": self.requests,
            "injected": dict(self.injected),
            "first_at": self.first_at,
            "last_at": self.last_at,
        }
