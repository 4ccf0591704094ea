"""Signs of a farmed reward in a step's rollouts: the share paid without being correct, and the
completions the policy repeats most.

"Paid" is a training reward above 0 (the env's rubric as re-weighted by
`orchestrator.reward.weights`); "correct" is the env's correctness metric at 1.0
(`Environment(correctness=...)`). A bonus that is farmed (a format reward paid for a wrong
answer copied from the prompt) shows as a rising `hacking/rewarded_incorrect` and one
completion taking a growing share of the step.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from typing import Any

from prime_env.record import RolloutRecord
from trainer_bridge.orchestrator.rewards import training_reward

TOP_COMPLETIONS = 3
TEXT_CHARS = 120


def completion_text(record: RolloutRecord) -> str:
    """What the model said in the rollout: its assistant messages, joined."""
    parts = []
    for message in record.completion:
        if message.get("role") == "assistant":
            content = message.get("content")
            parts.append(content if isinstance(content, str) else str(content or ""))
    return " | ".join(parts)


def is_correct(record: RolloutRecord, correctness: str) -> bool:
    scores = {**record.metrics, **record.rewards}
    return scores.get(correctness, 0.0) >= 1.0


def hacking_metrics(
    records: Sequence[RolloutRecord], weights: dict[str, float], correctness: str | None
) -> dict[str, Any]:
    """`hacking/*` for one step: `rewarded_incorrect` (share of the scored rollouts paid
    without being correct; only when the env names its correctness metric),
    `top_completion_share` and `top_completions` (the most repeated, with counts)."""
    scored = [r for r in records if r.error is None and r.reward is not None]
    if not scored:
        return {}
    out: dict[str, Any] = {}
    if correctness is not None:
        paid_wrong = sum(
            1 for r in scored if training_reward(r, weights) > 0 and not is_correct(r, correctness)
        )
        out["hacking/rewarded_incorrect"] = round(paid_wrong / len(scored), 4)
    counts = Counter(completion_text(r) for r in scored)
    top = counts.most_common(TOP_COMPLETIONS)
    out["hacking/top_completion_share"] = round(top[0][1] / len(scored), 4)
    out["hacking/top_completions"] = [
        {"text": text[:TEXT_CHARS], "count": count} for text, count in top if count > 1
    ]
    return out
