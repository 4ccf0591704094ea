"""One decode step of a Llama-architecture model (SmolLM2 is one), without transformers'
generic forward pass around the matrix products.

On a CPU most of a small model's step beyond the matrix products is per-step machinery (module
calls, attention dispatch, mask and output objects, and `DynamicCache` copying every layer's
keys and values with `torch.cat` at every token). This step runs the same operations in the
same order on the model's own weights and modules, over key/value buffers that grow by
doubling: its logits equal the model's forward pass (bit for bit in an unpadded batch; tested),
and it is a little faster per token (docs/benchmarks.md, "Local model").

The projections go through `F.linear` on the module's current weight when the module is a
plain `nn.Linear`, and through the module itself otherwise (a peft LoRA layer then adds its
adapter), so a policy swapped into the model in place (`trainer_bridge.protocol.policy`) is what the
next step uses. On a GPU a LoRA projection runs as one `F.linear` on its folded weight
instead (merged_lora.py: a decode step there is bound by kernel launches). The attention mask
lives in a buffer that grows with the keys, so a step writes one column instead of copying
the mask. Any other architecture, or attention other than SDPA, gets `None` from
`LlamaStep.start` and decodes through the model's forward pass.

A batch may name each row's adapter (`adapters`, peft's mixed-adapter batch: `__base__` for
none): each LoRA projection then adds to each row only that row's adapter, and nothing folds.
"""

from __future__ import annotations

from typing import Any

import torch
import torch.nn.functional as F
from torch import nn

from .merged_lora import folded_weight


class LlamaStep:
    """Decode steps continuing a prefill whose keys and values are in a `DynamicCache`."""

    def __init__(
        self,
        base: Any,
        keys: list[torch.Tensor],
        values: list[torch.Tensor],
        mask: torch.Tensor | None,
        fold_lora: bool,
        adapters: list[str] | None,
    ) -> None:
        self._inner = base.model
        self._lm_head = base.lm_head
        self._layers = list(self._inner.layers)
        self._fold = fold_lora and adapters is None
        self._adapters = adapters
        config = base.config
        self._heads = config.num_attention_heads
        self._kv_heads = config.num_key_value_heads
        self._head_dim = getattr(config, "head_dim", None) or (
            config.hidden_size // config.num_attention_heads
        )
        self._length = keys[0].shape[2]
        capacity = 2 * self._length + 16
        self._keys = [_grown(k, capacity) for k in keys]
        self._values = [_grown(v, capacity) for v in values]
        self._mask = None if mask is None else _grown_mask(mask.bool(), capacity)

    @classmethod
    def start(
        cls,
        model: Any,
        cache: Any,
        mask: torch.Tensor | None = None,
        *,
        fold_lora: bool | None = None,
        adapters: list[str] | None = None,
    ) -> LlamaStep | None:
        """Steps for `model` (or the model a peft wrapper holds) after a prefill into `cache`
        under `mask` (batch, length; None for an unpadded batch); None where this step would
        not compute what the model's forward pass does. `fold_lora` (default: on a GPU) runs
        each LoRA projection on its folded weight; `adapters` names each row's adapter."""
        base = model.get_base_model() if hasattr(model, "get_base_model") else model
        config = getattr(base, "config", None)
        if (
            config is None
            or getattr(config, "model_type", None) != "llama"
            or getattr(config, "_attn_implementation", None) != "sdpa"
            or getattr(config, "pretraining_tp", 1) != 1
            or base.training
        ):
            return None
        layers = getattr(cache, "layers", None)
        if layers is None or len(layers) != config.num_hidden_layers:
            return None
        if fold_lora is None:
            fold_lora = base.lm_head.weight.device.type == "cuda"
        keys = [layer.keys for layer in layers]
        return cls(base, keys, [layer.values for layer in layers], mask, fold_lora, adapters)

    def select(self, index: torch.Tensor) -> None:
        """Keep only the batch rows at `index` (rows that finished leave the batch)."""
        if self._adapters is not None:
            self._adapters = [self._adapters[i] for i in index.tolist()]
        self._keys = [k.index_select(0, index) for k in self._keys]
        self._values = [v.index_select(0, index) for v in self._values]
        if self._mask is not None:
            self._mask = self._mask.index_select(0, index)

    def join(self, cache: Any, mask: torch.Tensor | None, adapters: list[str] | None) -> None:
        """Add the rows a prefill put in `cache` (their padding `mask`, None if unpadded; their
        `adapters`, named as the rows decoding name theirs) after the rows decoding. Each side
        is right-aligned to the longer one; the columns that aligning adds are masked out.
        Rotary positions are in the keys already (each row's own), so a row's place in the
        buffer changes nothing it computes."""
        if (adapters is None) != (self._adapters is None):
            raise ValueError("rows joining a batch name their adapters as its rows do")
        if self._adapters is not None and adapters is not None:
            self._adapters = self._adapters + adapters
        keys = [layer.keys for layer in cache.layers]
        values = [layer.values for layer in cache.layers]
        new_length = keys[0].shape[2]
        length = max(self._length, new_length)
        capacity = max(self._keys[0].shape[2], 2 * length + 16)
        ours = self._mask
        if ours is None:
            ours = self._keys[0].new_ones(self._keys[0].shape[0], self._length, dtype=torch.bool)
        theirs = keys[0].new_ones(keys[0].shape[0], new_length, dtype=torch.bool)
        if mask is not None:
            theirs = mask.bool()
        self._mask = torch.cat(
            [_placed_mask(ours[:, : self._length], length, capacity),
             _placed_mask(theirs, length, capacity)]
        )  # fmt: skip
        self._keys = [
            torch.cat(
                [_placed(k[:, :, : self._length], length, capacity), _placed(n, length, capacity)]
            )
            for k, n in zip(self._keys, keys)
        ]
        self._values = [
            torch.cat(
                [_placed(v[:, :, : self._length], length, capacity), _placed(n, length, capacity)]
            )
            for v, n in zip(self._values, values)
        ]
        self._length = length

    def __call__(self, ids: torch.Tensor, positions: torch.Tensor) -> torch.Tensor:
        """The next-token logits (batch, vocabulary) after `ids` (batch, 1) at `positions`
        (batch, 1); every row attends to the new position and to its own earlier ones."""
        inner, heads, kv_heads, dim = self._inner, self._heads, self._kv_heads, self._head_dim
        end = self._length + 1
        if end > self._keys[0].shape[2]:
            self._keys = [_grown(k, 2 * end) for k in self._keys]
            self._values = [_grown(v, 2 * end) for v in self._values]
            if self._mask is not None:
                self._mask = _grown_mask(self._mask, 2 * end)
        attend = None
        if self._mask is not None:
            self._mask[:, end - 1] = True
            attend = self._mask[:, None, None, :end]
        project = self._project
        hidden = inner.embed_tokens(ids)
        batch = hidden.shape[0]
        cos, sin = inner.rotary_emb(hidden, positions)
        cos, sin = cos.unsqueeze(1), sin.unsqueeze(1)
        for layer, keys, values in zip(self._layers, self._keys, self._values):
            attention, mlp = layer.self_attn, layer.mlp
            x = layer.input_layernorm(hidden)
            q = project(attention.q_proj, x).view(batch, 1, heads, dim).transpose(1, 2)
            k = project(attention.k_proj, x).view(batch, 1, kv_heads, dim).transpose(1, 2)
            v = project(attention.v_proj, x).view(batch, 1, kv_heads, dim).transpose(1, 2)
            keys[:, :, end - 1 : end] = _rotated(k, cos, sin)
            values[:, :, end - 1 : end] = v
            out = F.scaled_dot_product_attention(
                _rotated(q, cos, sin),
                keys[:, :, :end],
                values[:, :, :end],
                attn_mask=attend,
                scale=attention.scaling,
                enable_gqa=heads != kv_heads,
            )
            out = out.transpose(1, 2).reshape(batch, 1, heads * dim)
            hidden = hidden + project(attention.o_proj, out)
            x = layer.post_attention_layernorm(hidden)
            gate = mlp.act_fn(project(mlp.gate_proj, x)) * project(mlp.up_proj, x)
            hidden = hidden + project(mlp.down_proj, gate)
        self._length = end
        logits: torch.Tensor = self._lm_head(inner.norm(hidden))
        return logits[:, -1]

    def _project(self, module: nn.Module, x: torch.Tensor) -> torch.Tensor:
        if type(module) is nn.Linear:
            return F.linear(x, module.weight, module.bias)
        if self._fold:
            weight = folded_weight(module)
            if weight is not None:
                return F.linear(x, weight, module.base_layer.bias)  # type: ignore[arg-type, union-attr]
        if self._adapters is not None:
            mixed: torch.Tensor = module(x, adapter_names=self._adapters)
            return mixed
        result: torch.Tensor = module(x)
        return result


def _rotated(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    """Rotary position embedding, as transformers' `apply_rotary_pos_emb` computes it."""
    half = x.shape[-1] // 2
    return x * cos + torch.cat((-x[..., half:], x[..., :half]), dim=-1) * sin


def _grown(cache: torch.Tensor, capacity: int) -> torch.Tensor:
    """`cache` (batch, heads, length, dim) copied into a buffer of `capacity` positions."""
    batch, heads, length, dim = cache.shape
    buffer = cache.new_empty(batch, heads, capacity, dim)
    buffer[:, :, :length] = cache[:, :, :length]
    return buffer


def _grown_mask(mask: torch.Tensor, capacity: int) -> torch.Tensor:
    """`mask` (batch, length) copied into a buffer of `capacity` positions (False after)."""
    buffer = mask.new_zeros(mask.shape[0], capacity)
    buffer[:, : mask.shape[1]] = mask
    return buffer


def _placed(cache: torch.Tensor, length: int, capacity: int) -> torch.Tensor:
    """`cache` (batch, heads, n, dim) right-aligned to end at `length` in a `capacity` buffer."""
    batch, heads, n, dim = cache.shape
    buffer = cache.new_zeros(batch, heads, capacity, dim)
    buffer[:, :, length - n : length] = cache
    return buffer


def _placed_mask(mask: torch.Tensor, length: int, capacity: int) -> torch.Tensor:
    """`mask` (batch, n) right-aligned to end at `length` in a `capacity` buffer (False before
    and after)."""
    buffer = mask.new_zeros(mask.shape[0], capacity)
    buffer[:, length - mask.shape[1] : length] = mask
    return buffer
