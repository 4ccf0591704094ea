"""The eval set's directory: read_set refuses what is not a set with a message that says what
--resume takes, and reads back what new_set wrote."""

from __future__ import annotations

from pathlib import Path

import pytest

from prime_env.errors import EvalError
from prime_env.eval_sets import SET_FILE, SetConfig, new_set, read_set


def _config() -> SetConfig:
    return SetConfig(envs=["a", "b"], models=["m"], env_args={}, n=2, r=1, sampling={})


def test_a_directory_without_set_json_is_refused_with_what_resume_takes(tmp_path: Path) -> None:
    with pytest.raises(EvalError, match="no set.json there.*outputs/sets/SET_ID"):
        read_set(tmp_path)


def test_a_damaged_set_json_is_refused(tmp_path: Path) -> None:
    (tmp_path / SET_FILE).write_text("{not json")
    with pytest.raises(EvalError, match="is not an eval set directory"):
        read_set(tmp_path)


def test_a_new_set_reads_back_with_one_cell_per_env_and_model(tmp_path: Path) -> None:
    created = new_set(tmp_path, _config())
    again = read_set(created.root)
    assert again.set_id == created.set_id and again.config == created.config
    assert [(c.env, c.model) for c in again.cells] == [("a", "m"), ("b", "m")]
