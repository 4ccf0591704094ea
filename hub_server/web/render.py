"""Rendering helpers for the web pages: the Jinja2 environment and its filters.

Everything user-supplied (names, descriptions, READMEs, sample transcripts) reaches the page
either through Jinja2's autoescaping or through PyPI's readme_renderer (hub_server.web.readme),
whose output nh3 has sanitised. There is no other path to the HTML.
"""

from __future__ import annotations

import json
import re
from datetime import datetime
from pathlib import Path
from typing import Any

from fastapi.templating import Jinja2Templates
from jinja2 import Undefined
from markupsafe import Markup, escape

from hub_server.evals.integrity import finite_score

TEMPLATES_DIR = Path(__file__).parent / "templates"
STATIC_DIR = Path(__file__).parent / "static"

_BACKTICKS = re.compile(r"`([^`]+)`")


def inline_code(text: str | None) -> Markup:
    """A message written for terminals (`prime login`) with its backticks as <code>: the text
    is escaped first, so only the code spans become markup."""
    escaped = str(escape(text or ""))
    return Markup(_BACKTICKS.sub(r"<code>\1</code>", escaped))  # safe: built from escaped text


def score(value: Any) -> str:
    """Rewards to three decimals; a missing value, or one that is not a finite score (a row
    stored before the hub's score rules), as an em dash, never as 0."""
    number = finite_score(value)
    return "—" if number is None else f"{number:.3f}"


def filesize(value: int | None) -> str:
    """Bytes as people read them: 812 B, 14.2 KiB, 3.1 MiB."""
    size = float(value or 0)
    for unit in ("B", "KiB", "MiB", "GiB"):
        if size < 1024 or unit == "GiB":
            return f"{size:.0f} {unit}" if unit == "B" else f"{size:.1f} {unit}"
        size /= 1024
    return f"{size:.1f} GiB"


def day(value: datetime | str | None) -> str:
    if value is None:
        return ""
    if isinstance(value, str):
        return value[:10]
    return value.strftime("%Y-%m-%d")


def _content_text(content: Any) -> str:
    if content is None or isinstance(content, Undefined):
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):  # OpenAI content parts
        parts = []
        for part in content:
            if isinstance(part, dict) and isinstance(part.get("text"), str):
                parts.append(part["text"])
            else:
                parts.append(json.dumps(part, ensure_ascii=False))
        return "\n".join(parts)
    return json.dumps(content, ensure_ascii=False, indent=1)


def messages(value: Any) -> list[dict[str, str]]:
    """A prompt or completion (a message list or a bare string) as role/text pairs to display.

    A record without the field (a template's Undefined) shows as nothing, like null."""
    if value is None or isinstance(value, Undefined):
        return []
    if isinstance(value, str):
        return [{"role": "text", "content": value}]
    if not isinstance(value, list):
        return [{"role": "data", "content": _content_text(value)}]
    shown = []
    for message in value:
        if not isinstance(message, dict):
            shown.append({"role": "data", "content": _content_text(message)})
            continue
        text = _content_text(message.get("content"))
        if message.get("tool_calls"):
            calls = json.dumps(message["tool_calls"], ensure_ascii=False, indent=1)
            text = f"{text}\n{calls}".strip()
        shown.append({"role": str(message.get("role", "message")), "content": text})
    return shown


def build_templates() -> Jinja2Templates:
    templates = Jinja2Templates(directory=str(TEMPLATES_DIR))
    templates.env.filters.update(
        score=score, day=day, messages=messages, inline_code=inline_code, filesize=filesize
    )
    return templates
