"""Sampling settings as a run stores them (what `--resume` compares and the runner uses)."""

from __future__ import annotations

from prime_env.evaluation import normalize_sampling, sampling_from_json


def test_temperature_zero_is_kept_as_greedy() -> None:
    """0.0 == False in Python: a filter on `in (None, False)` dropped `-T 0`, so greedy evals
    (the trainer's own included) sampled at the provider's default temperature instead."""
    stored = normalize_sampling({"temperature": 0.0, "max_tokens": 8, "logprobs": False})
    assert stored == {"temperature": 0.0, "max_tokens": 8}
    assert sampling_from_json(stored).temperature == 0.0
