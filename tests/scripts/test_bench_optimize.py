"""bench_optimize's choice of the trained policy to optimise a prompt for."""

from __future__ import annotations

from scripts.bench_optimize import pick_policy


def test_the_first_trained_policy_in_the_sensitive_band_is_taken() -> None:
    assert pick_policy({0: 0.0, 1: 0.0, 2: 0.46, 3: 0.7, 4: 0.94}) == 2
    assert pick_policy({0: 0.5, 1: 0.9, 2: 0.3}) == 2  # step 0, the base model, never


def test_without_one_the_nearest_to_the_bands_middle() -> None:
    assert pick_policy({0: 0.0, 1: 0.0, 2: 0.92, 3: 0.96}) == 2
    assert pick_policy({0: 0.0, 1: 0.0}) == 1
