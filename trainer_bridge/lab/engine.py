"""The Lab's torch engine: one base model in memory, each tenant's model a peft LoRA adapter.

All adapters live in one `PeftModel` over the one copy of the base weights; a request
activates its adapter (`set_adapter`, which also makes only that adapter's weights trainable),
so gradients accumulate per adapter until its `optim_step` (AdamW, one optimizer per adapter).
The losses are Tinker's built-ins, summed over tokens: `cross_entropy` (-weights * logp),
`importance_sampling` (-exp(logp - sampling logp) * advantage) and `ppo` (its clipped form).
Sampling decodes many requests at once through `local_model.decode` (a KV cache, rows leaving
the batch as they end, requests joining between two tokens): each row by its own request's
adapter (peft's mixed-adapter batch, so no row sees another's), temperature, top-k, top-p,
stops and seeded generator, so a request gets what it would alone. The logprob of each sampled
token is the model's own (log-softmax of the logits before temperature), which is what
`forward` computes for it.
It runs on one thread (the Lab's worker) and implements `hub_server.lab.engine.LabEngine`
structurally (plain values across; trainer_bridge never imports the hub).
"""

from __future__ import annotations

import io
import json
import os
import tarfile
import warnings
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

import numpy as np
import torch

from registry_index.peft_adapter import CONFIG as _CONFIG
from registry_index.peft_adapter import WEIGHTS as _WEIGHTS
from registry_index.peft_adapter import tar_files
from trainer_bridge.config import ModelConfig
from trainer_bridge.cores import idle_threads
from trainer_bridge.trainer.modeling import load_base, right_pad

ATTENTION = ["q_proj", "k_proj", "v_proj", "o_proj"]
MLP = ["gate_proj", "up_proj", "down_proj"]
LORA_ALPHA = 32
LOSSES = ("cross_entropy", "importance_sampling", "ppo")
_PLACEHOLDER = "_lab_base"  # peft needs one adapter to exist; rank 1, B = 0: the base itself
_OPTIMIZER = "optimizer.pt"

Sampled = tuple[list[int], list[float], str]  # tokens, their logprobs, "stop" | "length"


class SampleCall(Protocol):
    """One sample request, as the Lab gives it (`hub_server.lab.engine.SampleCall`)."""

    @property
    def adapter(self) -> str | None: ...
    @property
    def prompt(self) -> list[int]: ...
    @property
    def num_samples(self) -> int: ...
    @property
    def params(self) -> dict[str, float | int | None]: ...
    @property
    def stop_tokens(self) -> list[int]: ...
    @property
    def stop_strings(self) -> list[str]: ...


class TorchLabEngine:
    """`base_model` (`local/<name>` or a Hugging Face directory) on `device`, fp32 on CPU;
    `threads`: torch's threads on a CPU (None: as the machine has room, `_threads`)."""

    def __init__(
        self,
        base_model: str = "local/smollm2-135m",
        device: str = "auto",
        threads: int | None = None,
    ) -> None:
        from peft import LoraConfig, get_peft_model

        model, tokenizer = load_base(ModelConfig(name=base_model, device=device))  # type: ignore[arg-type]
        self.base_model = base_model
        self.threads = threads
        self.tokenizer = tokenizer
        self.max_context = int(getattr(model.config, "max_position_embeddings", 2048))
        self.device = next(model.parameters()).device
        for parameter in model.parameters():
            parameter.requires_grad_(False)
        placeholder = LoraConfig(r=1, lora_alpha=1, target_modules=["q_proj"], lora_dropout=0.0)
        with warnings.catch_warnings():
            warnings.filterwarnings("ignore", category=FutureWarning)
            self.model: Any = get_peft_model(model, placeholder, adapter_name=_PLACEHOLDER)
        self.model.eval()  # no dropout: training and sampling compute the same function
        self._optimizers: dict[str, torch.optim.AdamW] = {}

    # ------------------------------------------------------------------ adapters

    def create_adapter(
        self, name: str, rank: int, seed: int | None, train_mlp: bool, train_attn: bool
    ) -> None:
        from peft import LoraConfig

        if not 1 <= rank <= 256:
            raise ValueError(f"LoRA rank {rank} is out of range; use 1 to 256.")
        targets = (ATTENTION if train_attn else []) + (MLP if train_mlp else [])
        if not targets:
            raise ValueError("Train the attention or the MLP layers (train_attn or train_mlp).")
        config = LoraConfig(r=rank, lora_alpha=LORA_ALPHA, target_modules=targets, lora_dropout=0.0)
        if seed is not None:
            torch.manual_seed(seed)
        self.model.add_adapter(name, config)
        self._optimizers[name] = torch.optim.AdamW(self._parameters(name), lr=1e-4)

    def delete_adapter(self, name: str) -> None:
        self.model.set_adapter(_PLACEHOLDER)
        self.model.delete_adapter(name)
        self._optimizers.pop(name, None)

    def copy_adapter(self, source: str, target: str) -> None:
        config = self.model.peft_config[source]
        self.model.add_adapter(target, config)
        with torch.no_grad():
            for dst, src in zip(self._parameters(target), self._parameters(source), strict=True):
                dst.copy_(src)

    def _parameters(self, name: str) -> list[torch.nn.Parameter]:
        marker = f".{name}."
        return [p for n, p in self.model.named_parameters() if marker in n]

    def _activate(self, name: str | None) -> None:
        """Make adapter `name` (the base when None) the one computed."""
        self._threads()
        self.check_adapter(name)
        self.model.set_adapter(name or _PLACEHOLDER)

    def check_adapter(self, name: str | None) -> None:
        """A ValueError unless adapter `name` is on this engine (None, the base, always is)."""
        if name is not None and name not in self.model.peft_config:
            raise ValueError(f"No adapter {name!r} on this Lab.")

    def _threads(self) -> None:
        """Compute on `self.threads`, else the threads the machine has room for: one on busy
        cores (`cores.idle_threads`; two threads on two cores at load ~8 took a 32-token
        sample from 2.3 to 30-49 CPU-s, docs/benchmarks.md)."""
        if self.device.type == "cpu":
            threads = self.threads or idle_threads(len(os.sched_getaffinity(0)), 1)
            if torch.get_num_threads() != threads:
                torch.set_num_threads(threads)

    # ------------------------------------------------------------------ training

    def forward_backward(
        self,
        name: str,
        tokens: list[np.ndarray],
        inputs: list[dict[str, np.ndarray]],
        loss_fn: str,
        config: dict[str, float],
        forward_only: bool,
    ) -> tuple[list[dict[str, np.ndarray]], dict[str, float]]:
        if loss_fn not in LOSSES:
            raise ValueError(f"Loss {loss_fn!r} is not served here; use one of {LOSSES}.")
        for index, (seq, fields) in enumerate(zip(tokens, inputs, strict=True)):
            _check_datum(index, seq, fields, loss_fn, self.max_context)
        self._activate(name)
        padded = right_pad([s.tolist() for s in tokens], 0, self.device)
        with torch.set_grad_enabled(not forward_only):
            logits = self.model(
                input_ids=padded.input_ids, attention_mask=padded.attention_mask
            ).logits
            logp_all = torch.log_softmax(logits.float(), dim=-1)
            total = torch.zeros((), device=self.device)
            outputs: list[dict[str, np.ndarray]] = []
            for row, (n, fields) in enumerate(zip(padded.lengths, inputs, strict=True)):
                target = torch.tensor(fields["target_tokens"], device=self.device).long()
                logp = logp_all[row, :n].gather(-1, target[:, None]).squeeze(-1)
                loss = _token_loss(loss_fn, logp, fields, config, self.device)
                total = total + loss.sum()
                outputs.append(
                    {
                        "logprobs": logp.detach().cpu().numpy().astype(np.float32),
                        "elementwise_loss": loss.detach().cpu().numpy().astype(np.float32),
                    }
                )
            if not forward_only:
                total.backward()
        return outputs, {"loss:sum": float(total.detach())}

    def optim_step(self, name: str, adam: dict[str, float]) -> dict[str, float]:
        self._activate(name)
        optimizer = self._optimizers[name]
        for group in optimizer.param_groups:
            group["lr"] = adam["learning_rate"]
            group["betas"] = (adam["beta1"], adam["beta2"])
            group["eps"] = adam["eps"]
            group["weight_decay"] = adam["weight_decay"]
        parameters = self._parameters(name)
        grads = [p.grad for p in parameters if p.grad is not None]
        norm = (
            float(torch.linalg.vector_norm(torch.stack([g.norm() for g in grads])))
            if grads
            else 0.0
        )
        if adam["grad_clip_norm"] > 0:
            torch.nn.utils.clip_grad_norm_(parameters, adam["grad_clip_norm"])
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        return {"grad_norm:mean": norm}

    # ------------------------------------------------------------------ sampling

    def sample_batch(
        self,
        calls: Sequence[SampleCall],
        more: Callable[[int], Sequence[SampleCall]],
        done: Callable[[int, list[Sampled] | ValueError], None],
    ) -> None:
        """Decode `calls` (and those `more` gives between two tokens) in one batch: see
        `hub_server.lab.engine.LabEngine.sample_batch`."""
        from local_model.decode import Row, decode

        self._threads()
        owner: list[tuple[_Decoding, int]] = []  # each row's call and its place in the call
        numbered = 0

        def rows_of(new: Sequence[SampleCall]) -> list[Row]:
            nonlocal numbered
            rows = []
            for call in new:
                index, numbered = numbered, numbered + 1
                try:
                    state = self._start_call(index, call)
                except ValueError as error:
                    done(index, error)
                    continue
                for slot in range(call.num_samples):
                    owner.append((state, slot))
                    rows.append(Row(call.prompt, state.max_tokens, state.stopped, state.adapter))
            return rows

        def pick(logits: torch.Tensor, active: list[int]) -> tuple[torch.Tensor, torch.Tensor]:
            logits = logits.float()
            chosen = logits.argmax(dim=-1)
            drawn: dict[int, tuple[_Decoding, list[int]]] = {}  # call -> its rows' places
            for place, row in enumerate(active):
                state = owner[row][0]
                if state.temperature > 0:
                    drawn.setdefault(state.index, (state, []))[1].append(place)
            for state, places in drawn.values():
                at = torch.tensor(places, device=logits.device)
                chosen[at] = _pick(logits[at], state.temperature, state.params, state.generator)
            logp = torch.log_softmax(logits, dim=-1)
            return chosen, logp.gather(1, chosen[:, None]).squeeze(1)

        def finished(row: int, tokens: list[int], logprobs: list[float]) -> None:
            state, slot = owner[row]
            state.sequences[slot] = (
                tokens,
                logprobs,
                "stop" if state.stopped(tokens) else "length",
            )
            if all(s is not None for s in state.sequences):
                done(state.index, [s for s in state.sequences if s is not None])

        first = rows_of(calls)
        if not first:
            return
        pad = self.tokenizer.pad_token_id
        decode(
            self.model,
            first,
            pad_id=int(pad if pad is not None else (self.tokenizer.eos_token_id or 0)),
            eos_id=-1,  # each row's own stops end it (`_Decoding.stopped`)
            temperature=0.0,
            admit=lambda active: rows_of(more(active)),
            finished=finished,
            pick=pick,
        )

    def _start_call(self, index: int, call: SampleCall) -> _Decoding:
        """A call's decoding state: its params checked, its generator seeded, its stops."""
        from local_model.decode import BASE

        max_tokens = self.check_call(call)
        seed = call.params.get("seed")
        generator = torch.Generator(device=self.device)
        if seed is None:
            generator.seed()  # its own random seed; torch's global generator left alone
        else:
            generator.manual_seed(int(seed))
        return _Decoding(
            index=index,
            adapter=call.adapter or BASE,
            max_tokens=max_tokens,
            temperature=float(call.params.get("temperature") or 0.0),
            params=call.params,
            generator=generator,
            stops=set(self.stop_tokens(call)),
            stop_strings=call.stop_strings,
            decode_text=self.tokenizer.decode,
            sequences=[None] * call.num_samples,
        )

    def check_call(self, call: SampleCall) -> int:
        """The call's max_tokens (16 when unset); a ValueError for what no engine can sample:
        an empty prompt, one that overflows the context, no samples, an unknown adapter."""
        max_tokens = int(call.params.get("max_tokens") or 16)
        if not call.prompt:
            raise ValueError("The prompt is empty; send at least one token.")
        if len(call.prompt) + max_tokens > self.max_context:
            raise ValueError(
                f"prompt ({len(call.prompt)}) + max_tokens ({max_tokens}) exceeds the model's "
                f"context of {self.max_context} tokens."
            )
        if call.num_samples < 1:
            raise ValueError("num_samples must be at least 1.")
        self.check_adapter(call.adapter)
        return max_tokens

    def stop_tokens(self, call: SampleCall) -> list[int]:
        """The tokens that end a row: the call's, else (no stop strings either) the EOS."""
        if call.stop_tokens or call.stop_strings or self.tokenizer.eos_token_id is None:
            return list(call.stop_tokens)
        return [int(self.tokenizer.eos_token_id)]

    def check_scored(self, name: str | None, prompt: list[int]) -> None:
        """A ValueError unless `prompt_logprobs` can score `prompt` under adapter `name`."""
        if not 1 < len(prompt) <= self.max_context:
            raise ValueError(f"Scoring needs 2 to {self.max_context} prompt tokens.")
        self.check_adapter(name)

    @torch.no_grad()
    def prompt_logprobs(self, name: str | None, prompt: list[int]) -> list[float]:
        """log p(prompt[i] | prompt[:i]) for i >= 1 under adapter `name` (the base when None):
        what `forward` computes for the same tokens (the SDK's `compute_logprobs`)."""
        self.check_scored(name, prompt)
        self._activate(name)
        ids = torch.tensor([prompt], device=self.device)
        logp = torch.log_softmax(self.model(input_ids=ids).logits[0, :-1].float(), dim=-1)
        return [float(x) for x in logp.gather(-1, ids[0, 1:, None]).squeeze(-1)]

    # ------------------------------------------------------------------ checkpoints

    def save(self, name: str, optimizer: bool) -> bytes:
        return tar_files(self._files(name, optimizer))

    def export(self, name: str, directory: Path) -> int:
        """Write adapter `name` as a PEFT adapter directory (what `save` tars, without the
        optimizer state); its rank."""
        directory.mkdir(parents=True, exist_ok=True)
        for filename, data in self._files(name, optimizer=False).items():
            (directory / filename).write_bytes(data)
        return int(self.model.peft_config[name].r)

    def _files(self, name: str, optimizer: bool) -> dict[str, bytes]:
        from peft import get_peft_model_state_dict
        from safetensors.torch import save as save_safetensors

        self._activate(name)
        config = self.model.peft_config[name].to_dict()
        config["base_model_name_or_path"] = self.base_model
        config["target_modules"] = sorted(config["target_modules"])
        state = get_peft_model_state_dict(self.model, adapter_name=name)
        files = {
            _CONFIG: json.dumps(config, indent=2, default=str).encode(),
            _WEIGHTS: save_safetensors(
                {k: v.detach().cpu().contiguous() for k, v in state.items()}
            ),
        }
        if optimizer:
            buffer = io.BytesIO()
            torch.save(self._optimizers[name].state_dict(), buffer)
            files[_OPTIMIZER] = buffer.getvalue()
        return files

    def load(self, name: str, archive: bytes, optimizer: bool) -> None:
        from peft import LoraConfig, set_peft_model_state_dict
        from safetensors.torch import load as load_safetensors

        files = _untar(archive)
        raw = json.loads(files[_CONFIG])
        config = LoraConfig(
            r=int(raw["r"]),
            lora_alpha=int(raw["lora_alpha"]),
            target_modules=list(raw["target_modules"]),
            lora_dropout=0.0,
        )
        if name in self.model.peft_config:
            self.delete_adapter(name)
        self.model.add_adapter(name, config)
        set_peft_model_state_dict(self.model, load_safetensors(files[_WEIGHTS]), adapter_name=name)
        self._optimizers[name] = torch.optim.AdamW(self._parameters(name), lr=1e-4)
        if optimizer and _OPTIMIZER in files:
            state = torch.load(io.BytesIO(files[_OPTIMIZER]), weights_only=True)
            self._optimizers[name].load_state_dict(state)


@dataclass
class _Decoding:
    """A sample call in a batch: its rows' adapter and sampling rule, and their sequences
    as they end."""

    index: int
    adapter: str
    max_tokens: int
    temperature: float
    params: dict[str, float | int | None]
    generator: torch.Generator
    stops: set[int]
    stop_strings: list[str]
    decode_text: Callable[[list[int]], str]
    sequences: list[Sampled | None] = field(default_factory=list)

    def stopped(self, tokens: list[int]) -> bool:
        """Whether a row's tokens so far end at one of the call's stops."""
        if tokens and tokens[-1] in self.stops:
            return True
        return bool(self.stop_strings) and any(
            s in self.decode_text(tokens) for s in self.stop_strings
        )


def _check_datum(
    index: int, tokens: np.ndarray, fields: dict[str, np.ndarray], loss_fn: str, context: int
) -> None:
    needed = {
        "cross_entropy": ("target_tokens",),
        "importance_sampling": ("target_tokens", "logprobs", "advantages"),
        "ppo": ("target_tokens", "logprobs", "advantages"),
    }[loss_fn]
    missing = [key for key in needed if key not in fields]
    if missing:
        raise ValueError(f"datum {index}: loss {loss_fn!r} needs loss_fn_inputs {missing}.")
    if not 0 < len(tokens) <= context:
        raise ValueError(f"datum {index}: {len(tokens)} tokens; send 1 to {context}.")
    for key, value in fields.items():
        if value.shape[:1] != tokens.shape[:1]:
            raise ValueError(
                f"datum {index}: loss_fn_inputs[{key!r}] has {value.shape[0]} positions "
                f"for {len(tokens)} input tokens; they must be equal."
            )


def _token_loss(
    loss_fn: str,
    logp: torch.Tensor,
    fields: dict[str, np.ndarray],
    config: dict[str, float],
    device: torch.device,
) -> torch.Tensor:
    def field(key: str, default: float) -> torch.Tensor:
        if key in fields:
            return torch.tensor(fields[key], device=device).float()
        return torch.full_like(logp, default)

    if loss_fn == "cross_entropy":
        return -field("weights", 1.0) * logp
    ratio = torch.exp(logp - field("logprobs", 0.0))
    advantage = field("advantages", 0.0)
    if loss_fn == "importance_sampling":
        return -ratio * advantage
    low = config.get("clip_low_threshold", 0.8)
    high = config.get("clip_high_threshold", 1.2)
    clipped = torch.clamp(ratio, low, high)
    return -torch.minimum(ratio * advantage, clipped * advantage)


def _pick(
    logits: torch.Tensor,
    temperature: float,
    params: dict[str, float | int | None],
    generator: torch.Generator,
) -> torch.Tensor:
    if temperature <= 0:
        return logits.argmax(dim=-1)
    scaled = logits / temperature
    top_k = int(params.get("top_k") or -1)
    if 0 < top_k < scaled.shape[-1]:
        kth = torch.topk(scaled, top_k, dim=-1).values[:, -1:]
        scaled = scaled.masked_fill(scaled < kth, float("-inf"))
    top_p = float(params.get("top_p") or 1.0)
    if top_p < 1.0:
        ordered, order = torch.sort(scaled, descending=True, dim=-1)
        cumulative = torch.softmax(ordered, dim=-1).cumsum(-1)
        drop = cumulative - torch.softmax(ordered, dim=-1) > top_p
        scaled = scaled.scatter(-1, order, ordered.masked_fill(drop, float("-inf")))
    probs = torch.softmax(scaled, dim=-1)
    return torch.multinomial(probs, 1, generator=generator).squeeze(-1)


def _untar(archive: bytes) -> dict[str, bytes]:
    files: dict[str, bytes] = {}
    try:
        with tarfile.open(fileobj=io.BytesIO(archive), mode="r") as tar:
            for member in tar.getmembers():
                extracted = tar.extractfile(member) if member.isfile() else None
                if extracted is not None:
                    files[member.name] = extracted.read()
    except tarfile.TarError as error:
        raise ValueError(f"The checkpoint is not a Lab archive: {error}") from None
    if _CONFIG not in files or _WEIGHTS not in files:
        raise ValueError(f"The checkpoint lacks {_CONFIG} or {_WEIGHTS}.")
    return files
