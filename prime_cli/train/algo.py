"""`prime train --algo A [--data X] [--teacher MODEL]`: one algorithm for the whole run.

The flags are `orchestrator.algo.type`, `.data` (resolved to a file by data.py) and
`.teacher.model`. A recipe whose stages set their own algorithm would override them in those
stages, so that combination is refused, naming the way out.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from prime_cli.errors import CliError
from trainer_bridge.config import ConfigError, TrainConfig


def algo_flags(
    algo: str | None, data: str | None, teacher: str | None, output_dir: Path | None
) -> list[tuple[str, Any]]:
    """The dotted overrides the three flags stand for (`--data` resolved to a JSONL file)."""
    from prime_cli.train.data import resolve_data

    flags: list[tuple[str, Any]] = []
    if algo is not None:
        flags.append(("orchestrator.algo.type", algo))
    if data is not None:
        try:
            path = resolve_data(data, output_dir or Path("outputs"))
        except CliError as exc:  # a wrong --data is a wrong config: exit 2, nothing started
            raise ConfigError(
                f"--data (a JSONL file, a run directory or id): {exc.message}"
            ) from None
        flags.append(("orchestrator.algo.data", str(path)))
    if teacher is not None:
        flags.append(("orchestrator.algo.teacher.model", teacher))
    return flags


def check_whole_run(config: TrainConfig) -> None:
    """`--algo` is the run's algorithm: refuse stages that choose their own."""
    own = [
        stage.name or f"stage_{i}"
        for i, stage in enumerate(config.stages)
        if "algo" in stage.orchestrator
    ]
    if own:
        raise ConfigError(
            f"--algo sets the run's algorithm, but stage(s) {', '.join(own)} of the config "
            "(the environment's recipe?) choose their own: pass --no-env-recipe, or set "
            "stages.N.orchestrator.algo in a -c file"
        )


def self_teacher_warnings(config: TrainConfig) -> list[str]:
    """A stage distilling (`opd`) from the student's own base model learns nothing: at step 0
    the teacher's logprobs are the student's, so every advantage is 0 (up to float error)."""
    student = config.model.name
    warnings = []
    for stage in config.stage_plan():
        algo = stage.config.orchestrator.algo
        teacher = algo.teacher
        if algo.type != "opd" or teacher is None or teacher.base_url is not None:
            continue
        if _same_model(teacher.model, student):
            warnings.append(
                f"stage {stage.name!r}: the opd teacher {teacher.model!r} is the student's own "
                "base model, so its logprobs are the student's and every advantage starts at 0 "
                "(nothing to learn); pass a stronger --teacher (a bigger model, a trained "
                "policy directory)"
            )
    return warnings


def _same_model(teacher: str, student: str) -> bool:
    if teacher == student:
        return True
    paths = [Path(name).expanduser() for name in (teacher, student)]
    return all(p.is_dir() for p in paths) and paths[0].resolve() == paths[1].resolve()
