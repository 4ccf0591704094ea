"""Question format and answer normalisation shared by the generator, the rubric and the tests."""

from __future__ import annotations

import json
import re
import string
from importlib import resources
from pathlib import Path
from typing import Any

from prime_env import Task, TaskSet

BLANK = "____"
YEAR = re.compile(r"(?<![\d,.])\b(1[0-9]{3}|20[0-2][0-9])\b(?![\d,])")


def cloze_question(cloze: str) -> str:
    return f'Which year belongs in the blank? "{cloze}"'


def normalize(text: str) -> str:
    """Lowercase, drop punctuation and articles, collapse spaces (SQuAD-style answer matching)."""
    text = text.lower()
    text = "".join(c for c in text if c not in string.punctuation)
    text = re.sub(r"\b(a|an|the)\b", " ", text)
    return " ".join(text.split())


def default_questions() -> list[dict[str, Any]]:
    text = (
        resources.files("wiki_search")
        .joinpath("data")
        .joinpath("questions.jsonl")
        .read_text("utf-8")
    )
    return [json.loads(line) for line in text.splitlines() if line]


def load_questions(source: str | Path | None) -> TaskSet:
    """The shipped questions, or a JSONL/JSON/CSV file of {question, answer} rows for a custom corpus."""
    if source is None:
        rows = default_questions()
        return TaskSet(
            Task(
                prompt=[{"role": "user", "content": row["question"]}],
                answer=row["answer"],
                info={"page_id": row["page_id"], "section_id": row["section_id"]},
                id=row["id"],
            )
            for row in rows
        )
    path = Path(source).expanduser()
    if not path.is_file():
        raise ValueError(
            f"questions file {source!r} does not exist; pass a .jsonl/.json/.csv with question and answer fields"
        )
    loader = {
        ".jsonl": TaskSet.from_jsonl,
        ".json": TaskSet.from_json,
        ".csv": TaskSet.from_csv,
    }.get(path.suffix)
    if loader is None:
        raise ValueError(f"questions file {path.name!r} must be .jsonl, .json or .csv")
    tasks = loader(path)
    missing = [t.id for t in tasks if t.answer in (None, "")]
    if missing:
        raise ValueError(f"{path}: {len(missing)} questions have no 'answer' (first: {missing[0]})")
    return tasks
