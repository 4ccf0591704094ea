"""Generate wiki_search/data/questions.jsonl offline from the default corpus.

    python builtin_envs/wiki-search/scripts/build_questions.py

Each question is a cloze: a sentence from a Wikipedia lead with its (only) year blanked out.
A sentence qualifies when it is 60-220 characters, holds exactly one year, does not open with
a pronoun (whose subject would be unknown out of context), and a BM25 search for the blanked
sentence ranks its page in the top 3 - so the answer is reachable with the environment's own
tools. At most one question per page; a seeded sample of pages keeps the output stable.
"""

from __future__ import annotations

import json
import random
import re
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from wiki_search.corpus import default_corpus
from wiki_search.questions import BLANK, YEAR, cloze_question
from wiki_search.search import SearchIndex

OUT = Path(__file__).resolve().parents[1] / "wiki_search" / "data" / "questions.jsonl"
COUNT = 500
SENTENCE = re.compile(r"(?<=[.!?])\s+(?=[A-Z])")
PRONOUN_START = re.compile(r"^(It|He|She|They|This|These|Those|His|Her|Its|Their|There)\b")


def main() -> int:
    corpus = default_corpus()
    index = SearchIndex(corpus)
    page_ids = sorted(corpus.pages)
    random.Random(0).shuffle(page_ids)
    rows = []
    for page_id in page_ids:
        if len(rows) >= COUNT:
            break
        page = corpus.pages[page_id]
        for section in page.sections:
            if section.heading == "About":
                continue
            found = None
            for sentence in SENTENCE.split(section.text):
                sentence = sentence.strip()
                years = YEAR.findall(sentence)
                if (
                    not 60 <= len(sentence) <= 220
                    or len(years) != 1
                    or PRONOUN_START.match(sentence)
                ):
                    continue
                cloze = YEAR.sub(BLANK, sentence)
                if page_id in [pid for pid, _ in index.search(cloze, 3)]:
                    found = (sentence, cloze, years[0])
                    break
            if found:
                sentence, cloze, year = found
                rows.append(
                    {
                        "id": f"ws-{len(rows):04d}",
                        "question": cloze_question(cloze),
                        "answer": year,
                        "page_id": page_id,
                        "section_id": section.id,
                        "sentence": sentence,
                    }
                )
                break
    if len(rows) < COUNT:
        print(f"only {len(rows)} questions qualified", file=sys.stderr)
        return 1
    OUT.parent.mkdir(parents=True, exist_ok=True)
    with OUT.open("w", encoding="utf-8") as fh:
        for row in rows:
            fh.write(json.dumps(row, ensure_ascii=False) + "\n")
    print(f"wrote {len(rows)} questions to {OUT}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
