"""Batch files: `batches/step_N/` ({samples.jsonl, meta.json}, `STABLE` last), the trainer's whole input.

A `TrainSample` is one token sequence with its loss mask, the sampler's logprobs and its
advantage (or per-token advantages, or cross-entropy weights): what the orchestrator writes and
the trainer reads, nothing about environments or the algorithm that made it.
"""

from __future__ import annotations

import json
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, model_validator

from trainer_bridge.protocol.run_dir import RunDir
from trainer_bridge.protocol.stable import is_stable, stable_dir

SAMPLES_FILE = "samples.jsonl"
META_FILE = "meta.json"
BATCH_POLL_S = 0.2
"""How often a trainer looks for the batch it waits for."""


class TrainSample(BaseModel):
    """One training sequence. Position i of every list is about `input_ids[i]` given
    `input_ids[:i]`; position 0 is never trained."""

    model_config = ConfigDict(extra="forbid")

    input_ids: list[int]
    loss_mask: list[int]
    """1 where `input_ids[i]` is trained (sampled by the policy, or a given trace's), else 0."""
    sampler_logprobs: list[float]
    """μ: the sampler's logprob of `input_ids[i]` (tempered, as sampled); 0.0 where mask is 0."""
    advantage: float
    advantages: list[float] | None = None
    """Per-token advantages of the `rl` part (`opd`); None: `advantage` on every loss token."""
    ce_weights: list[float] | None = None
    """Per-token weights of the `ce` part (cross-entropy on given traces: `sft`, `rft`): such a
    sample feeds the `ce` part only, on the tokens its loss mask marks."""
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
        for name in ("advantages", "ce_weights"):
            values = getattr(self, name)
            if values is not None and len(values) != n:
                raise ValueError(f"{name} ({len(values)}) must have one entry per token ({n})")
        if n and self.loss_mask[0]:
            raise ValueError("loss_mask[0] must be 0: the first token has no prefix to predict it")
        return self

    @property
    def num_loss_tokens(self) -> int:
        return sum(self.loss_mask)


@dataclass
class Batch:
    step: int
    samples: list[TrainSample]
    meta: dict[str, Any]


def write_batch(
    run_dir: Path,
    step: int,
    samples: Sequence[TrainSample],
    meta: dict[str, Any] | None = None,
    *,
    overwrite: bool = False,
) -> Path:
    """Write `batches/step_N/` ({samples.jsonl, meta.json}) atomically, `STABLE` last. An
    empty batch is a step without an update (every group it saw had zero advantage): the
    trainer steps its schedule and publishes the same weights as the next policy."""
    final = RunDir(run_dir).batch(step)
    with stable_dir(final, overwrite=overwrite) as scratch:
        with (scratch / SAMPLES_FILE).open("w") as out:
            for sample in samples:
                out.write(sample.model_dump_json() + "\n")
        body = {**(meta or {}), "step": step, "num_samples": len(samples)}
        (scratch / META_FILE).write_text(json.dumps(body, indent=2))
    return final


def batch_ready(run_dir: Path, step: int) -> bool:
    return is_stable(RunDir(run_dir).batch(step))


def wait_for_batch(run_dir: Path, step: int, poll_s: float = BATCH_POLL_S) -> float:
    """Block until the step's batch is stable (a trainer's side of the handoff); seconds waited."""
    started = time.perf_counter()
    while not batch_ready(run_dir, step):
        time.sleep(poll_s)
    return time.perf_counter() - started


def read_batch(run_dir: Path, step: int) -> Batch:
    """Read a stable batch; FileNotFoundError if it is not (yet) complete."""
    path = RunDir(run_dir).batch(step)
    if not is_stable(path):
        raise FileNotFoundError(f"{path} is not complete (no STABLE marker)")
    with (path / SAMPLES_FILE).open() as lines:
        samples = [TrainSample.model_validate_json(line) for line in lines if line.strip()]
    meta = json.loads((path / META_FILE).read_text())
    return Batch(step=step, samples=samples, meta=meta)
