"""Sampling settings as a run stores them (what `--resume` compares and the runner uses), and
what load_env says of an ENV that names no environment."""

from __future__ import annotations

from pathlib import Path

import pytest

from prime_env.errors import EvalError
from prime_env.evaluation import load_env, normalize_sampling, sampling_from_json


def test_temperature_zero_is_kept_as_greedy() -> None:
    """0.0 == False in Python: a filter on `in (None, False)` dropped `-T 0`, so greedy evals
    (the trainer's own included) sampled at the provider's default temperature instead."""
    stored = normalize_sampling({"temperature": 0.0, "max_tokens": 8, "logprobs": False})
    assert stored == {"temperature": 0.0, "max_tokens": 8}
    assert sampling_from_json(stored).temperature == 0.0


@pytest.mark.parametrize("spec", ["/no/such/env", "./no-such-env", "../no-such-env", "gone.py"])
def test_a_missing_path_is_named_as_a_path(
    spec: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Not read as OWNER/NAME (which said "'' is not a valid owner" of /no/such/env)."""
    monkeypatch.chdir(tmp_path)
    with pytest.raises(EvalError, match=f"environment path {spec} does not exist; ENV is"):
        load_env(spec, {})
