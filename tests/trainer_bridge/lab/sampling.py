"""Driving a Lab engine's `sample_batch` directly, as the Lab's worker does: each call's outcome
in order, with joiners given at a chosen ask for more (the torch and vLLM engines' tests)."""

from __future__ import annotations

from hub_server.lab.engine import LabEngine, SampleCall, SampledTokens

Outcome = list[SampledTokens] | ValueError


def run(
    engine: LabEngine,
    calls: list[SampleCall],
    joining: list[SampleCall] | None = None,
    join_at: int = 1,
) -> list[Outcome]:
    """Each call's outcome, in order (`joining` given at the `join_at`-th ask for more)."""
    outcomes: dict[int, Outcome] = {}
    asked: list[int] = []

    def more(rows: int) -> list[SampleCall]:
        asked.append(rows)
        return (joining or []) if len(asked) == join_at else []

    engine.sample_batch(calls, more, outcomes.__setitem__)
    return [outcomes[i] for i in range(len(calls) + len(joining or []))]


def sequences(outcome: Outcome) -> list[SampledTokens]:
    assert not isinstance(outcome, ValueError), outcome
    return outcome
