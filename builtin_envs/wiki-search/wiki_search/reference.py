"""The reference policy: search, open the right page, read the right section, extract the answer.

Every step is a real tool call, written as the `local/` models write them
(`<tool_call>{"name": ..., "arguments": ...}</tool_call>`, prime_env.chat_template), so its
traces are SFT data for SmolLM2 in the model's own wire format. It knows which page and
section a shipped question was made from (`info`) and goes straight there when the search
lists them; otherwise (a custom corpus) it reads the hits' sections in rank order. The answer is
read off the section: the year that fills the question's blank, or for a custom question the
reference answer when the section states it.
"""

from __future__ import annotations

import json
import re
from typing import Any

from prime_env import State
from prime_env.chat_template import tool_call_text

from .questions import BLANK, normalize

Message = dict[str, Any]


def _question(messages: list[Message]) -> str:
    return next(str(m["content"]) for m in messages if m["role"] == "user")


def _cloze(question: str) -> str | None:
    """The quoted sentence of a shipped question ("Which year belongs in the blank? "…____…""), else None."""
    if BLANK not in question or question.count('"') < 2:
        return None
    return question.split('"', 1)[1].rsplit('"', 1)[0]


def _results(messages: list[Message]) -> list[tuple[str, dict[str, Any], str]]:
    """(tool name, arguments, result) of every call so far, in order."""
    calls = {
        call["id"]: call["function"]
        for m in messages
        if m["role"] == "assistant"
        for call in m.get("tool_calls") or []
    }
    out = []
    for message in messages:
        if message["role"] == "tool" and message.get("tool_call_id") in calls:
            function = calls[message["tool_call_id"]]
            out.append((function["name"], json.loads(function["arguments"]), message["content"]))
    return out


def _extract(text: str, cloze: str | None, answer: str) -> str | None:
    """The answer as this section states it, or None when it does not."""
    if cloze is not None:
        pattern = re.escape(cloze).replace(re.escape(BLANK), r"(\d{4})")
        found = re.search(pattern, text)
        return found.group(1) if found else None
    return answer if answer and normalize(answer) in normalize(text) else None


def solve(messages: list[Message], state: State) -> str:
    """The next turn: one tool call, or the answer once a section read states it."""
    question = _question(messages)
    cloze = _cloze(question)
    info = state.task.info
    pages: list[str] = []
    sections: list[str] = []
    viewed: set[str] = set()
    read: set[str] = set()
    for name, args, content in _results(messages):
        if name == "search_pages":
            pages = [hit["page_id"] for hit in json.loads(content)] if content[:1] == "[" else []
        elif name == "view_sections":
            viewed.add(args["page_id"])
            sections += [s["section_id"] for s in json.loads(content)]
        elif name == "read_section":
            read.add(args["section_id"])
            found = _extract(content, cloze, str(state.task.answer or ""))
            if found is not None:
                return f"<answer>{found}</answer>"
    if not pages and not viewed:
        return tool_call_text("search_pages", {"query": cloze or question})
    unread = [s for s in sections if s not in read]
    if info.get("section_id") in unread:
        unread.insert(0, info["section_id"])
    if unread:
        return tool_call_text("read_section", {"section_id": unread[0]})
    unviewed = [p for p in pages if p not in viewed]
    if info.get("page_id") in unviewed:
        unviewed.insert(0, info["page_id"])
    if unviewed:
        return tool_call_text("view_sections", {"page_id": unviewed[0]})
    return "<answer>unknown</answer>"
