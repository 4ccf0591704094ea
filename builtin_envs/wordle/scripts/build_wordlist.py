"""Build wordle/data/words.txt and answers.txt from Debian's `wamerican` word list.

Run at build time (the generated files are committed so the wheel is self-contained and
nothing is fetched at run time):

    python builtin_envs/wordle/scripts/build_wordlist.py [/usr/share/dict/american-english]

`words.txt` holds every 5-letter, lowercase ASCII word (the valid guesses). `answers.txt` drops
simple plurals and third-person forms ("abets" when "abet" is a word), as the original game's
answer list does, so hidden words are base forms a player would expect.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

DEFAULT_SOURCE = Path("/usr/share/dict/american-english")
DATA_DIR = Path(__file__).resolve().parents[1] / "wordle" / "data"
FIVE_LOWER = re.compile(r"^[a-z]{5}$")


def build(source: Path) -> tuple[list[str], list[str]]:
    """Return (valid guesses, answer candidates), both sorted and de-duplicated."""
    all_words = {line.strip() for line in source.read_text(encoding="utf-8").splitlines()}
    words = sorted(w for w in all_words if FIVE_LOWER.match(w))
    answers = [w for w in words if not (w.endswith("s") and w[:-1] in all_words)]
    return words, answers


def main(argv: list[str]) -> int:
    source = Path(argv[1]) if len(argv) > 1 else DEFAULT_SOURCE
    if not source.is_file():
        print(f"error: word list {source} not found; install Debian's `wamerican`", file=sys.stderr)
        return 2
    words, answers = build(source)
    DATA_DIR.mkdir(parents=True, exist_ok=True)
    (DATA_DIR / "words.txt").write_text("\n".join(words) + "\n", encoding="utf-8")
    (DATA_DIR / "answers.txt").write_text("\n".join(answers) + "\n", encoding="utf-8")
    print(f"wrote {len(words)} words and {len(answers)} answers from {source}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv))
