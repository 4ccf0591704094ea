"""Builders for PEFT LoRA adapter directories, written by hand in the safetensors format (an
8-byte little-endian header length, a JSON header, the bytes), so tests need neither torch nor
peft; the shapes are a LoRA's (lora_A: rank x in, lora_B: out x rank), the values random."""

from __future__ import annotations

import json
import random
import struct
from pathlib import Path
from typing import Any

BASE = "local/smollm2-135m"


def safetensors_bytes(tensors: dict[str, list[int]], seed: int = 0) -> bytes:
    """F32 tensors of these shapes, random values, as a safetensors file."""
    rng = random.Random(seed)
    header: dict[str, Any] = {"__metadata__": {"format": "pt"}}
    data = bytearray()
    for name, shape in tensors.items():
        count = 1
        for dim in shape:
            count *= dim
        begin = len(data)
        data += struct.pack(f"<{count}f", *(rng.uniform(-0.1, 0.1) for _ in range(count)))
        header[name] = {"dtype": "F32", "shape": shape, "data_offsets": [begin, len(data)]}
    raw = json.dumps(header).encode()
    raw += b" " * (-len(raw) % 8)  # the header is padded to 8 bytes, as the library writes it
    return struct.pack("<Q", len(raw)) + raw + bytes(data)


def lora_shapes(
    layers: int = 2, width: int = 32, rank: int = 4, v_width: int | None = None
) -> dict[str, list[int]]:
    """A LoRA on the q and v projections of a Llama (`v_width`: v_proj's outputs, GQA)."""
    out = {}
    for layer in range(layers):
        for module, outputs in (("q_proj", width), ("v_proj", v_width or width)):
            where = f"base_model.model.model.layers.{layer}.self_attn.{module}"
            out[f"{where}.lora_A.weight"] = [rank, width]
            out[f"{where}.lora_B.weight"] = [outputs, rank]
    return out


def adapter_config(base_model: str | None = BASE, rank: int = 4, **extra: Any) -> dict[str, Any]:
    return {
        "peft_type": "LORA",
        "base_model_name_or_path": base_model,
        "r": rank,
        "lora_alpha": 32,
        "target_modules": ["q_proj", "v_proj"],
        "lora_dropout": 0.0,
        **extra,
    }


def write_adapter(
    directory: Path, *, base_model: str | None = BASE, rank: int = 4, seed: int = 0,
    width: int = 32, smollm2: bool = False,
) -> Path:  # fmt: skip
    """A valid LoRA adapter directory (adapter_config.json, adapter_model.safetensors); with
    `smollm2`, one that loads on local/smollm2-135m (30 layers, 576 wide, 3 KV heads of 64)."""
    directory.mkdir(parents=True, exist_ok=True)
    (directory / "adapter_config.json").write_text(
        json.dumps(adapter_config(base_model, rank), indent=2)
    )
    shapes = (
        lora_shapes(30, 576, rank, v_width=192) if smollm2 else lora_shapes(rank=rank, width=width)
    )
    weights = safetensors_bytes(shapes, seed)
    (directory / "adapter_model.safetensors").write_bytes(weights)
    return directory
