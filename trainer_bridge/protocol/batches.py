"""Rollout records → token-exact training samples, and the batch files that carry them.

Every id and logprob comes from the backend that sampled it (`RolloutRecord.turns`); text is
never re-tokenised, because a chat template re-rendering a transcript need not reproduce the
ids the model sampled (trl#5224, prime-rl#1334). Turns of one rollout merge into one sequence
while each prompt extends the previous prompt + completion exactly; where it does not (the
template re-rendered a reply differently, a stop string cut it), the turn starts a new sample.

The loss mask is 1 exactly on sampled tokens (EOS included) and 0 on prompt, tool, env and
template tokens, so Σ mask = Σ completion tokens of the record.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, model_validator

from prime_env.record import RolloutRecord, Turn
from trainer_bridge.protocol.stable import is_stable, stable_dir, step_dir

TRUNCATED_STOPS = frozenset({"length", "token_budget"})
"""Stop reasons meaning the last model turn was cut off by a token limit."""

SAMPLES_FILE = "samples.jsonl"
META_FILE = "meta.json"


class SampleError(Exception):
    """A record that cannot become a training sample; `error_type` is counted by the caller."""

    def __init__(self, error_type: str, message: str) -> None:
        super().__init__(f"{error_type}: {message}")
        self.error_type = error_type


class TrainSample(BaseModel):
    """One training sequence. Position i of every list is about `input_ids[i]` given
    `input_ids[:i]`; position 0 is never trained."""

    model_config = ConfigDict(extra="forbid")

    input_ids: list[int]
    loss_mask: list[int]
    """1 where the policy sampled `input_ids[i]`, else 0."""
    sampler_logprobs: list[float]
    """μ: the sampler's logprob of `input_ids[i]` (tempered, as sampled); 0.0 where mask is 0."""
    advantage: float
    temperature: float = 1.0
    """The sampling temperature: the trainer's π_θ is tempered the same way."""
    truncated: bool = False
    policy_version: int | None = None
    """The oldest policy that sampled any token of this sequence."""
    group: str = ""
    task_id: str = ""
    rollout_index: int = 0
    reward: float | None = None

    @model_validator(mode="after")
    def _aligned(self) -> TrainSample:
        n = len(self.input_ids)
        if len(self.loss_mask) != n or len(self.sampler_logprobs) != n:
            raise ValueError(
                f"input_ids ({n}), loss_mask ({len(self.loss_mask)}) and sampler_logprobs "
                f"({len(self.sampler_logprobs)}) must have one entry per token"
            )
        if n and self.loss_mask[0]:
            raise ValueError("loss_mask[0] must be 0: the first token has no prefix to predict it")
        return self

    @property
    def num_loss_tokens(self) -> int:
        return sum(self.loss_mask)


@dataclass
class _Building:
    ids: list[int] = field(default_factory=list)
    mask: list[int] = field(default_factory=list)
    logprobs: list[float] = field(default_factory=list)
    versions: list[int] = field(default_factory=list)

    def add(self, ids: Sequence[int], sampled: bool, logprobs: Sequence[float] = ()) -> None:
        self.ids.extend(ids)
        self.mask.extend([1 if sampled else 0] * len(ids))
        self.logprobs.extend(logprobs if sampled else [0.0] * len(ids))


def _checked_turns(record: RolloutRecord) -> list[Turn]:
    turns = record.turns or []
    where = f"{record.task_id} rollout {record.rollout_index}"
    if not turns:
        raise SampleError(
            "missing_token_ids",
            f"{where} has no token ids: the model server must return them "
            "(vLLM: --return-tokens-as-token-ids; the torch backend always does)",
        )
    for i, turn in enumerate(turns):
        if (
            turn.prompt_token_ids is None
            or turn.completion_token_ids is None
            or turn.completion_logprobs is None
        ):
            raise SampleError(
                "missing_token_ids",
                f"{where} turn {i} lacks prompt ids, completion ids or logprobs; "
                "text is never re-tokenised",
            )
        if len(turn.completion_logprobs) != len(turn.completion_token_ids):
            raise SampleError(
                "token_logprob_mismatch",
                f"{where} turn {i}: {len(turn.completion_token_ids)} completion ids but "
                f"{len(turn.completion_logprobs)} logprobs",
            )
    return turns


def samples_from_record(
    record: RolloutRecord,
    *,
    advantage: float,
    temperature: float = 1.0,
    group: str = "",
) -> list[TrainSample]:
    """The training samples of one scored rollout (raise SampleError if it has no ids)."""
    if record.error is not None or record.reward is None:
        raise SampleError("errored_rollout", f"{record.task_id}: error records are never trained")
    turns = _checked_turns(record)
    pieces: list[_Building] = []
    current: _Building | None = None
    for turn in turns:
        prompt = list(turn.prompt_token_ids or [])
        completion = list(turn.completion_token_ids or [])
        if current is not None and prompt[: len(current.ids)] == current.ids:
            current.add(prompt[len(current.ids) :], sampled=False)
        else:
            current = _Building()
            pieces.append(current)
            current.add(prompt, sampled=False)
        current.add(completion, sampled=True, logprobs=turn.completion_logprobs or [])
        version = turn.policy_version if turn.policy_version is not None else record.policy_version
        if version is not None:
            current.versions.append(version)
    truncated = record.stop_reason in TRUNCATED_STOPS
    return [
        TrainSample(
            input_ids=piece.ids,
            loss_mask=piece.mask,
            sampler_logprobs=piece.logprobs,
            advantage=advantage,
            temperature=temperature,
            truncated=truncated and i == len(pieces) - 1,
            policy_version=min(piece.versions) if piece.versions else None,
            group=group,
            task_id=record.task_id,
            rollout_index=record.rollout_index,
            reward=record.reward,
        )
        for i, piece in enumerate(pieces)
    ]


@dataclass
class Batch:
    step: int
    samples: list[TrainSample]
    meta: dict[str, Any]


def batch_dir(run_dir: Path, step: int) -> Path:
    return step_dir(run_dir / "batches", step)


def write_batch(
    run_dir: Path,
    step: int,
    samples: Sequence[TrainSample],
    meta: dict[str, Any] | None = None,
    *,
    overwrite: bool = False,
) -> Path:
    """Write `batches/step_N/` ({samples.jsonl, meta.json}) atomically, `STABLE` last."""
    if not samples:
        raise ValueError(f"batch {step} is empty: nothing to train on")
    final = batch_dir(run_dir, step)
    with stable_dir(final, overwrite=overwrite) as scratch:
        with (scratch / SAMPLES_FILE).open("w") as out:
            for sample in samples:
                out.write(sample.model_dump_json() + "\n")
        body = {**(meta or {}), "step": step, "num_samples": len(samples)}
        (scratch / META_FILE).write_text(json.dumps(body, indent=2))
    return final


def batch_ready(run_dir: Path, step: int) -> bool:
    return is_stable(batch_dir(run_dir, step))


def read_batch(run_dir: Path, step: int) -> Batch:
    """Read a stable batch; FileNotFoundError if it is not (yet) complete."""
    path = batch_dir(run_dir, step)
    if not is_stable(path):
        raise FileNotFoundError(f"{path} is not complete (no STABLE marker)")
    with (path / SAMPLES_FILE).open() as lines:
        samples = [TrainSample.model_validate_json(line) for line in lines if line.strip()]
    meta = json.loads((path / META_FILE).read_text())
    return Batch(step=step, samples=samples, meta=meta)
