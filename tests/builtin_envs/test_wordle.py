"""wordle: feedback rules, word lists, game messages, and oracle/anti-oracle runs through the harness."""

from __future__ import annotations

import random
import re
import sys
from pathlib import Path

import pytest
import wordle
from wordle import load_environment, pattern
from wordle.reference import history
from wordle.solver import OPENER, _encode, best_guess, code_of, pattern_codes
from wordle.words import all_words, answers, valid_guesses

from prime_env import run_rollouts, summarize
from prime_env.reference_check import validate_reference
from tests.builtin_envs.policy import PolicyClient
from tests.support import require

# (guess, answer, expected): the repeated-letter cases one-pass implementations get wrong.
TRICKY = [
    ("speed", "abide", "XXYXY"),  # one E in the answer: only the first misplaced E is yellow
    ("speed", "erase", "YXYYX"),  # two Es in the answer, both misplaced: two yellows
    ("speed", "steal", "GXGXX"),  # the green E claims the only E; the second E is gray
    ("eerie", "there", "YXYXG"),  # three Es guessed, two in the answer, one of them green
    ("allee", "eagle", "YYXYG"),  # two Ls guessed, one in the answer
    ("lever", "eerie", "XGXYY"),
    ("geese", "eerie", "XGYXG"),  # greens first, then one E left for a yellow
    ("crane", "crane", "GGGGG"),
    ("abbey", "babes", "YYGGX"),  # two Bs in both words: one green, one yellow
    ("mamma", "maxim", "GGYXX"),  # three Ms guessed, two in the answer (one green)
    ("xylyl", "lolly", "XYGXY"),  # the later L is yellow because the answer has three Ls
    ("kayak", "aorta", "XYXYX"),  # two misplaced As against two As: both yellow
    ("array", "ready", "YYXXG"),  # the second R and the second A are gray
    ("sassy", "asses", "YYGYX"),  # three Ss in both words: one green, two yellow
    ("tweet", "treat", "GXGXG"),  # the green E claims the only E
    ("label", "bells", "YXYYY"),
]


@pytest.mark.parametrize(("guess", "answer", "expected"), TRICKY)
def test_feedback_repeated_letters(guess: str, answer: str, expected: str) -> None:
    assert pattern(guess, answer) == expected


def test_vectorised_feedback_matches_reference() -> None:
    rng = random.Random(7)
    words = list(all_words())
    guesses = rng.sample(words, 150) + [g for g, _, _ in TRICKY]
    targets = rng.sample(words, 150) + [a for _, a, _ in TRICKY]
    codes = pattern_codes(_encode(guesses), _encode(targets))
    for i, g in enumerate(guesses):
        for j, t in enumerate(targets):
            assert codes[i, j] == code_of(pattern(g, t)), (g, t)


def test_feedback_rejects_length_mismatch() -> None:
    with pytest.raises(ValueError, match="differ in length"):
        pattern("cran", "crane")


def test_word_lists_are_real_five_letter_words() -> None:
    words = all_words()
    assert len(words) > 4000
    assert all(re.fullmatch(r"[a-z]{5}", w) for w in words)
    assert {"crane", "about", "house", "raise"} <= valid_guesses()
    train, evals = set(answers("train")), set(answers("eval"))
    assert train and evals and not (train & evals)
    assert train | evals <= valid_guesses()
    assert 0.1 < len(evals) / (len(train) + len(evals)) < 0.3
    assert "abets" in valid_guesses() and "abets" not in train | evals  # "abet"+s is no answer


def test_committed_word_list_matches_generator(tmp_path: Path) -> None:
    """The shipped data is exactly what scripts/build_wordlist.py builds from wamerican."""
    source = Path("/usr/share/dict/american-english")
    require(source.is_file(), "Debian's wamerican word list (scripts/system_deps.sh installs it)")
    script = Path(wordle.__file__).parents[1] / "scripts" / "build_wordlist.py"
    sys.path.insert(0, str(script.parent))
    try:
        import build_wordlist
    finally:
        sys.path.remove(str(script.parent))
    words, ans = build_wordlist.build(source)
    assert tuple(words) == all_words()
    assert set(ans) == set(answers("train")) | set(answers("eval"))


def test_opener_is_the_entropy_best_first_guess() -> None:
    assert best_guess(tuple(answers("train") + answers("eval"))) == OPENER


async def test_the_shipped_reference_solves_from_feedback_through_the_harness() -> None:
    env = load_environment(num_eval_examples=12)
    report = await validate_reference(env, concurrency=4)
    assert report.passed and report.errors == 0
    records = report.records
    assert all(r.rewards["solved"] == 1.0 for r in records)
    assert all(r.rewards["format_ok"] == 1.0 for r in records)
    assert all(r.stop_reason == "env_done" for r in records)
    first = records[0]
    assert "Correct!" in first.completion[-1]["content"]
    assert 2 <= first.metrics["turns"] <= 6 and first.metrics["invalid_guesses"] == 0
    assert first.completion[0]["content"] == f"<guess>{OPENER}</guess>"


def test_the_reference_reads_its_history_off_the_transcript() -> None:
    messages = [
        {"role": "assistant", "content": "<guess>raise</guess>"},
        {"role": "user", "content": "R:X A:Y I:X S:X E:G\n5 guesses left."},
        {"role": "assistant", "content": "<guess>about</guess>"},
        {"role": "user", "content": "Invalid guess (ABOUT is not in the word list)."},
    ]
    assert history(messages) == [("raise", "XYXXG")]


async def test_random_and_empty_policies_score_low() -> None:
    env = load_environment(num_eval_examples=8)
    rng = random.Random(0)
    words = sorted(valid_guesses())
    random_records = await run_rollouts(
        env, PolicyClient(lambda m: f"<guess>{rng.choice(words)}</guess>"), n=8, r=1
    )
    assert summarize(random_records).reward_mean < 0.3
    empty_records = await run_rollouts(env, PolicyClient(lambda m: ""), n=8, r=1)
    assert summarize(empty_records).reward_mean == 0.0
    assert all(r.metrics["invalid_guesses"] == 6 for r in empty_records)
    assert all("Out of guesses" in r.completion[-1]["content"] for r in empty_records)


@pytest.mark.parametrize(
    ("reply", "message"),
    [
        ("crane", "reply with exactly one guess as <guess>xxxxx</guess>"),
        ("<guess>cranes</guess>", "'cranes' is not a 5-letter word"),
        ("<guess>cr4ne</guess>", "'cr4ne' is not a 5-letter word"),
        ("<guess>zzzzz</guess>", "ZZZZZ is not in the word list"),
        ("<guess>crane", "reply with exactly one guess"),
    ],
)
async def test_invalid_guesses_get_a_clear_message_and_cost_a_turn(
    reply: str, message: str
) -> None:
    env = load_environment(num_eval_examples=1, max_guesses=2)
    replies = iter([reply, "<guess>about</guess>"])
    records = await run_rollouts(env, PolicyClient(lambda m: next(replies)), n=1, r=1)
    record = records[0]
    assert record.error is None
    feedback = record.completion[1]["content"]
    assert message in feedback and "counts as a turn" in feedback and "1 guess left" in feedback
    assert record.metrics["invalid_guesses"] == 1 and record.metrics["turns"] == 2


def test_bad_arguments_are_rejected_clearly() -> None:
    with pytest.raises(ValueError, match="max_guesses must be between 1 and 20"):
        load_environment(max_guesses=0)
