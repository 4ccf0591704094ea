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
next step uses. Any other architecture, or attention other than SDPA, gets `None` from
`LlamaStep.start` and decodes through the model's forward pass.
"""

from __future__ import annotations

from typing import Any

import torch
import torch.nn.functional as F
from torch import nn


class LlamaStep:
    """Decode steps continuing a prefill whose keys and values are in a `DynamicCache`."""

    def __init__(self, base: Any, keys: list[torch.Tensor], values: list[torch.Tensor]) -> None:
        self._inner = base.model
        self._lm_head = base.lm_head
        self._layers = list(self._inner.layers)
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

    @classmethod
    def start(cls, model: Any, cache: Any) -> LlamaStep | None:
        """Steps for `model` (or the model a peft wrapper holds) after a prefill into `cache`;
        None where this step would not compute what the model's forward pass does."""
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
        return cls(base, [layer.keys for layer in layers], [layer.values for layer in layers])

    def select(self, index: torch.Tensor) -> None:
        """Keep only the batch rows at `index` (rows that finished leave the batch)."""
        self._keys = [k.index_select(0, index) for k in self._keys]
        self._values = [v.index_select(0, index) for v in self._values]

    def __call__(
        self, ids: torch.Tensor, positions: torch.Tensor, mask: torch.Tensor | None
    ) -> torch.Tensor:
        """The next-token logits (batch, vocabulary) after `ids` (batch, 1) at `positions`
        (batch, 1); `mask` (batch, length + 1) marks the positions each row attends to, None
        for an unpadded batch."""
        inner, heads, kv_heads, dim = self._inner, self._heads, self._kv_heads, self._head_dim
        end = self._length + 1
        if end > self._keys[0].shape[2]:
            self._keys = [_grown(k, 2 * end) for k in self._keys]
            self._values = [_grown(v, 2 * end) for v in self._values]
        hidden = inner.embed_tokens(ids)
        batch = hidden.shape[0]
        cos, sin = inner.rotary_emb(hidden, positions)
        cos, sin = cos.unsqueeze(1), sin.unsqueeze(1)
        attend = None if mask is None else mask.bool()[:, None, None, :]
        for layer, keys, values in zip(self._layers, self._keys, self._values):
            attention, mlp = layer.self_attn, layer.mlp
            x = layer.input_layernorm(hidden)
            q = _project(attention.q_proj, x).view(batch, 1, heads, dim).transpose(1, 2)
            k = _project(attention.k_proj, x).view(batch, 1, kv_heads, dim).transpose(1, 2)
            v = _project(attention.v_proj, x).view(batch, 1, kv_heads, dim).transpose(1, 2)
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
            hidden = hidden + _project(attention.o_proj, out)
            x = layer.post_attention_layernorm(hidden)
            gate = mlp.act_fn(_project(mlp.gate_proj, x)) * _project(mlp.up_proj, x)
            hidden = hidden + _project(mlp.down_proj, gate)
        self._length = end
        logits: torch.Tensor = self._lm_head(inner.norm(hidden))
        return logits[:, -1]


def _project(module: nn.Module, x: torch.Tensor) -> torch.Tensor:
    if type(module) is nn.Linear:
        return F.linear(x, module.weight, module.bias)
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
