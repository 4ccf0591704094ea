"""A fast single-turn env for orchestration tests: reward = share of vowels in the reply.

A random-init model's replies differ enough in that share that groups almost never have zero
variance. `latency_median_s`/`latency_sigma` make scoring take a log-normal time (a judge or
tool standing in), which is what async sampling hides (acceptance item 4).
"""

from __future__ import annotations

import asyncio
import math
import random
from typing import Any

from prime_env import Environment, Rubric, SingleTurn, Task, last_assistant_text

WORDS = ["apple", "river", "stone", "cloud", "music", "tiger", "lemon", "ocean", "pixel", "maple"]


def task(i: int, prefix: str, words: list[str] = WORDS) -> Task:
    """Task `prefix-i`: say a word like the i-th of `words` (round and round)."""
    word = words[i % len(words)]
    return Task(
        prompt=[{"role": "user", "content": f"Say a word like {word}."}],
        answer=word,
        id=f"{prefix}-{i}",
    )


def load_environment(
    num_tasks: int = 32,
    num_eval: int = 4,
    latency_median_s: float = 0.0,
    latency_sigma: float = 1.0,
    seed: int = 0,
) -> Environment:
    rng = random.Random(seed)

    async def vowels(completion: list[dict[str, Any]]) -> float:
        if latency_median_s > 0:
            await asyncio.sleep(rng.lognormvariate(math.log(latency_median_s), latency_sigma))
        text = last_assistant_text(completion) or ""
        letters = [c for c in text.lower() if c.isalpha()]
        return sum(c in "aeiou" for c in letters) / len(letters) if letters else 0.0

    return Environment(
        [task(i, "train") for i in range(num_tasks)],
        SingleTurn(),
        Rubric([vowels]),
        name="vowels",
        eval_tasks=[task(i, "eval") for i in range(num_eval)],
    )
