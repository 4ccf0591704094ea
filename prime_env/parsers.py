"""Strict answer parsers.

verifiers' XMLParser gave full format credit for mismatched or unclosed tags (verifiers#116,
#207). Here a malformed document is simply not a match: `parse` returns None and
`format_reward` returns 0.0. Every parser reads the LAST assistant message of a completion.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

Message = dict[str, Any]


def last_assistant_text(completion: str | Sequence[Message]) -> str | None:
    """The text of the last assistant message (or the string itself)."""
    if isinstance(completion, str):
        return completion
    for message in reversed(completion):
        if message.get("role") == "assistant":
            content = message.get("content")
            if isinstance(content, list):  # content parts
                return "".join(p.get("text", "") for p in content if isinstance(p, dict))
            return content or ""
    return None


class Parser:
    """Base: `parse_text` extracts the answer from one text; the rest is shared."""

    def parse_text(self, text: str) -> str | None:
        raise NotImplementedError

    def parse_answer(self, completion: str | Sequence[Message]) -> str | None:
        """The answer in the last assistant message, or None when it is missing or malformed."""
        text = last_assistant_text(completion)
        return None if text is None else self.parse_text(text)

    def format_reward(self, completion: str | Sequence[Message]) -> float:
        """1.0 when the last assistant message is well-formed for this parser, else 0.0.

        Usable directly as a reward or metric: `Rubric([...], metrics=[parser.format_reward])`.
        """
        return 0.0 if self.parse_answer(completion) is None else 1.0


class XMLParser(Parser):
    """Fields in `<tag>…</tag>`. Strict: every field tag must open and close exactly once, in
    order, without nesting another field; otherwise the whole message is malformed.

    `fields` are the tags the format requires (e.g. ["think", "answer"]); `answer_field` is
    the one `parse_answer` returns.
    """

    def __init__(self, fields: Sequence[str] = ("answer",), answer_field: str = "answer") -> None:
        if not fields:
            raise ValueError("XMLParser needs at least one field")
        for name in fields:
            if not re.fullmatch(r"[A-Za-z_][\w.-]*", name):
                raise ValueError(f"invalid XML tag name {name!r}")
        if answer_field not in fields:
            raise ValueError(f"answer_field {answer_field!r} is not one of fields {list(fields)}")
        self.fields = tuple(fields)
        self.answer_field = answer_field
        names = "|".join(re.escape(f) for f in self.fields)
        self._tag = re.compile(rf"<(/?)({names})\s*>")

    def parse(self, text: str) -> dict[str, str] | None:
        """All fields present in `text`, or None if any field tag is malformed or repeated."""
        found: dict[str, str] = {}
        open_name: str | None = None
        open_end = 0
        for match in self._tag.finditer(text):
            closing, name = match.group(1) == "/", match.group(2)
            if not closing:
                if open_name is not None or name in found:
                    return None  # nested field, or the same field twice
                open_name, open_end = name, match.end()
            else:
                if open_name != name:
                    return None  # close without a matching open
                found[name] = text[open_end : match.start()].strip()
                open_name = None
        if open_name is not None:
            return None  # unclosed
        return found

    def parse_text(self, text: str) -> str | None:
        fields = self.parse(text)
        if fields is None:
            return None
        return fields.get(self.answer_field)

    def format_reward(self, completion: str | Sequence[Message]) -> float:
        text = last_assistant_text(completion)
        fields = None if text is None else self.parse(text)
        return 1.0 if fields is not None and all(f in fields for f in self.fields) else 0.0

    def format(self, **values: str) -> str:
        """Render fields in the expected format (for few-shot examples and system prompts)."""
        return "\n".join(f"<{f}>\n{values[f]}\n</{f}>" for f in self.fields if f in values)


class BoxedParser(Parser):
    """The content of the last `\\boxed{…}`, with balanced braces; an unbalanced box is no match."""

    _start = re.compile(r"\\boxed\s*\{")

    def parse_text(self, text: str) -> str | None:
        starts = [m.end() for m in self._start.finditer(text)]
        if not starts:
            return None
        start = starts[-1]
        depth = 1
        for pos in range(start, len(text)):
            char = text[pos]
            if char == "{":
                depth += 1
            elif char == "}":
                depth -= 1
                if depth == 0:
                    return text[start:pos].strip()
        return None


class LastLineParser(Parser):
    """The last non-empty line; with `prefix` (e.g. "Answer:") that line must start with it."""

    def __init__(self, prefix: str | None = None) -> None:
        self.prefix = prefix

    def parse_text(self, text: str) -> str | None:
        lines = [line.strip() for line in text.splitlines() if line.strip()]
        if not lines:
            return None
        last = lines[-1]
        if self.prefix is None:
            return last
        if not last.startswith(self.prefix):
            return None
        answer = last[len(self.prefix) :].strip()
        return answer or None
