"""A single-turn environment for the fake provider: each task asks the model to `say:` a word.

The fake model answers `say: X` with X, so a correct pipeline scores 1.0 on every rollout; a
reward of 0 can only come from a bug (e.g. a provider fault scored instead of recorded).
Tasks whose info has `wrong` ask for a different word than the answer, giving known zeros.
"""

from __future__ import annotations

import prime_env as pe


async def exact(completion: list[dict], answer: str) -> float:
    return 1.0 if (pe.last_assistant_text(completion) or "").strip() == answer else 0.0


async def length(completion: list[dict]) -> float:
    return float(len(pe.last_assistant_text(completion) or ""))


def load_environment(num_tasks: int = 200, wrong_every: int = 0) -> pe.Environment:
    if num_tasks < 1:
        raise ValueError(f"num_tasks must be at least 1, got {num_tasks}")
    records = []
    for i in range(num_tasks):
        word = f"w{i}"
        said = f"x{i}" if wrong_every and i % wrong_every == 0 else word
        records.append({"prompt": f"say: {said}", "answer": word, "id": f"t{i}"})
    return pe.Environment(
        pe.TaskSet.from_records(records),
        pe.SingleTurn(),
        pe.Rubric([exact], metrics=[length]),
        name="say",
    )
