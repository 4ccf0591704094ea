"""`prime train --algo opd --teacher T`: a teacher that is the student's own base model is
warned about (every advantage starts at 0), in any spelling of the same directory."""

from __future__ import annotations

from pathlib import Path

from prime_cli.train.algo import self_teacher_warnings
from trainer_bridge.config_loader import build_config


def opd(model: str, teacher: str, tmp_path: Path) -> list[str]:
    config = build_config(
        [],
        [("model.name", model), ("orchestrator.algo.type", "opd"),
         ("orchestrator.algo.teacher.model", teacher)],
        env_id="prime/arithmetic",
    )  # fmt: skip
    return self_teacher_warnings(config)


def test_the_student_as_its_own_teacher_is_warned_about(tmp_path: Path) -> None:
    (warning,) = opd("local/smollm2-135m", "local/smollm2-135m", tmp_path)
    assert "is the student's own base model" in warning and "--teacher" in warning
    model = tmp_path / "model"
    model.mkdir()
    assert opd(str(model), str(model) + "/", tmp_path)  # the same directory, spelt otherwise
    assert opd("local/smollm2-135m", str(model), tmp_path) == []
