"""A sample's trace graph on the run page: its model calls as a tree of branches.

The trace (`trace` of a rollout record) comes from whoever pushed the samples, so it is read
defensively: indices out of range, parents that do not come first, or non-integers show as
nothing rather than fail the page, and at most `MAX_CALLS` calls are drawn.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from markupsafe import Markup, escape

MAX_CALLS = 200
SNIPPET = 60


def _snippet(message: Any) -> str:
    if not isinstance(message, Mapping):
        return ""
    content = message.get("content")
    if isinstance(content, list):
        content = " ".join(str(p.get("text", "")) for p in content if isinstance(p, Mapping))
    text = " ".join(str(content or "").split())
    if not text and message.get("tool_calls"):
        calls = message["tool_calls"]
        names = [
            str((c.get("function") or {}).get("name", "")) for c in calls if isinstance(c, Mapping)
        ]
        text = "calls " + ", ".join(names)
    return text if len(text) <= SNIPPET else text[: SNIPPET - 1] + "…"


def _root(messages: list[Any], parents: list[Any], index: Any) -> Any:
    """The first message of the request whose last message is `index`."""
    seen = 0
    while isinstance(index, int) and 0 <= index < len(parents) and seen < len(parents):
        parent = parents[index]
        if not isinstance(parent, int) or not 0 <= parent < index:
            return messages[index] if index < len(messages) else None
        index, seen = parent, seen + 1
    return None


def trace_tree(sample: Any) -> Markup:
    """The calls of `sample` nested by branch, or nothing for a linear (trace-less) sample."""
    if not isinstance(sample, Mapping) or not isinstance(sample.get("trace"), Mapping):
        return Markup("")
    trace = sample["trace"]
    calls = [c for c in (trace.get("calls") or [])[:MAX_CALLS] if isinstance(c, Mapping)]
    parents = trace.get("parents") if isinstance(trace.get("parents"), list) else []
    messages = [*(sample.get("prompt") or []), *(sample.get("completion") or [])]
    if not calls or not isinstance(messages, list):
        return Markup("")
    children: dict[int | None, list[int]] = {}
    for i, call in enumerate(calls):
        parent = call.get("parent")
        parent = parent if isinstance(parent, int) and 0 <= parent < i else None
        children.setdefault(parent, []).append(i)

    def branch(parent: int | None) -> str:
        items = []
        for i in children.get(parent, []):
            call = calls[i]
            reply = call.get("reply")
            said = (
                messages[reply] if isinstance(reply, int) and 0 <= reply < len(messages) else None
            )
            start = _root(messages, parents, call.get("request")) if parent is None else None
            head = f'<span class="muted">from {escape(_snippet(start))}</span> ' if start else ""
            items.append(f"<li>call {i + 1}: {head}→ {escape(_snippet(said))}{branch(i)}</li>")
        return f"<ul>{''.join(items)}</ul>" if items else ""

    roots = len(children.get(None, []))
    leaves = sum(1 for i in range(len(calls)) if i not in children)
    simulated = trace.get("simulated") or []
    extra = (
        f", {len(simulated)} messages by a simulated user"
        if isinstance(simulated, list) and simulated
        else ""
    )
    summary = f"Trace: {len(calls)} model calls, {leaves} branches from {roots} roots{extra}"
    html = f'<details class="trace"><summary>{escape(summary)}</summary>{branch(None)}</details>'
    return Markup(html)  # safe: every piece of text in it went through escape()
