"""A peft LoRA projection's weight with its adapter folded in, for decoding on a GPU.

A peft `lora.Linear` runs its base layer and then, per adapter, two more matrix products, a
scale and an add: four kernel launches beside the base one, on each of a Llama layer's seven
projections. At a small model's decode step a GPU is bound by launches, not arithmetic, so
`LlamaStep` there uses `W + scaling * B @ A` in one `F.linear` instead. The folded weight is
kept per module and rebuilt only when one of its tensors changed: a policy broadcast copies
into the adapter in place, which bumps each tensor's version counter.

Only plain LoRA folds (no DoRA or other variants, no LoRA bias, no `fan_in_fan_out`); any
other module gets None and runs as itself. The sum is taken in float32 and rounded once to
the weight's dtype, so it differs from the unfolded path only by that rounding.
"""

from __future__ import annotations

import weakref
from typing import Any

import torch
from torch import nn

_folded: weakref.WeakKeyDictionary[nn.Module, tuple[tuple[int, ...], torch.Tensor]] = (
    weakref.WeakKeyDictionary()
)


def folded_weight(module: nn.Module) -> torch.Tensor | None:
    """`module`'s weight with its active LoRA adapters added, or None where it cannot fold."""
    parts = _parts(module)
    if parts is None:
        return None
    base, adapters = parts
    key = (base.weight._version, *(t._version for a, b, _ in adapters for t in (a, b)))
    cached = _folded.get(module)
    if cached is not None and cached[0] == key:
        return cached[1]
    with torch.no_grad():
        total = base.weight.float()
        for a, b, scaling in adapters:
            total = total + (b.float() @ a.float()) * scaling
        weight = total.to(base.weight.dtype)
    _folded[module] = (key, weight)
    return weight


def _parts(
    module: nn.Module,
) -> tuple[nn.Linear, list[tuple[torch.Tensor, torch.Tensor, float]]] | None:
    base: Any = getattr(module, "base_layer", None)
    lora_a: Any = getattr(module, "lora_A", None)
    lora_b: Any = getattr(module, "lora_B", None)
    if (
        type(base) is not nn.Linear
        or lora_a is None
        or lora_b is None
        or getattr(module, "disable_adapters", True)
        or getattr(module, "merged", True)
        or getattr(module, "fan_in_fan_out", True)
        or getattr(module, "lora_variant", None)  # DoRA and the like change the formula
        or any(getattr(module, "use_dora", {}).values())  # peft before lora_variant
    ):
        return None
    adapters: list[tuple[torch.Tensor, torch.Tensor, float]] = []
    for name in getattr(module, "active_adapters", []):
        if name not in lora_a:
            continue
        a, b = lora_a[name], lora_b[name]
        if type(a) is not nn.Linear or type(b) is not nn.Linear or b.bias is not None:
            return None
        adapters.append((a.weight, b.weight, float(module.scaling[name])))  # type: ignore[index]
    return base, adapters
