"""Samples as conversations in the terminal (`prime eval show --samples`, `prime eval samples`):
one header line (example, rollout, reward and its parts, or the error; stop reason), then each
message as `role: text`, long texts cut with a note of what was left out. `--output json` keeps
the records whole; `prime eval view` shows them in the browser."""

from __future__ import annotations

import json
from typing import Any

from rich.console import Console
from rich.text import Text

MESSAGE_CHARS = 1_500
"""Characters of one message shown; the rest is counted, not printed."""


def _content(message: dict[str, Any]) -> str:
    content = message.get("content")
    if isinstance(content, list):  # content parts
        text = "\n".join(
            part.get("text", "") if isinstance(part, dict) else str(part) for part in content
        )
    else:
        text = "" if content is None else str(content)
    for call in message.get("tool_calls") or []:
        function = call.get("function", {}) if isinstance(call, dict) else {}
        text += f"\n→ {function.get('name', '?')}({function.get('arguments', '')})"
    return text.strip()


def _header(sample: dict[str, Any]) -> str:
    where = f"example {sample.get('example_index')} · rollout {sample.get('rollout_index')}"
    error = sample.get("error")
    if error:
        kind = error.get("type") if isinstance(error, dict) else error
        message = error.get("message", "") if isinstance(error, dict) else ""
        return f"{where} · error {kind}: {message}"
    parts = {**(sample.get("rewards") or {}), **(sample.get("metrics") or {})}
    shown = ", ".join(f"{k} {v:.3g}" for k, v in parts.items() if isinstance(v, (int, float)))
    reward = sample.get("reward")
    text = f"{where} · reward {reward:.3f}" if isinstance(reward, (int, float)) else where
    text += f" ({shown})" if shown else ""
    stop = sample.get("stop_reason")
    return text + (f" · stop {stop}" if stop else "")


def print_conversation(console: Console, sample: dict[str, Any]) -> None:
    """One sample: its header, then prompt and completion as `role: text` blocks."""
    console.print(Text(f"── {_header(sample)}", style="bold"), soft_wrap=True)
    for message in [*(sample.get("prompt") or []), *(sample.get("completion") or [])]:
        if not isinstance(message, dict):
            message = {"role": "data", "content": json.dumps(message)}
        text = _content(message)
        cut = len(text) - MESSAGE_CHARS
        body = Text(f"{message.get('role', '?')}: ", style="bold")
        body.append(text[:MESSAGE_CHARS])
        if cut > 0:
            body.append(f" … {cut} more characters", style="dim")
        console.print(body, soft_wrap=True)
    answer = sample.get("answer")
    if answer not in (None, ""):
        console.print(Text(f"expected: {answer}", style="dim"))
