"""PEFT LoRA adapter checks (`registry_index.peft_adapter`): what the safetensors library writes
passes and what it reads back is ours, and every broken config or weights file is refused with
a message that says what is wrong."""

from __future__ import annotations

import io
import json
import struct
from typing import Any

import pytest

from registry_index.errors import InvalidUpload
from registry_index.peft_adapter import check_weights, read_config
from tests.registry_index.adaptermaker import adapter_config, lora_shapes, safetensors_bytes


def weights_refusal(data: bytes) -> str:
    with pytest.raises(InvalidUpload) as info:
        check_weights(io.BytesIO(data), len(data))
    return str(info.value)


def with_header(header: dict[str, Any], data: bytes) -> bytes:
    raw = json.dumps(header).encode()
    return struct.pack("<Q", len(raw)) + raw + data


def test_the_libraries_files_pass_and_ours_load_in_the_library() -> None:
    np = pytest.importorskip("numpy")
    safetensors_numpy = pytest.importorskip("safetensors.numpy")
    ours = safetensors_bytes(lora_shapes(), seed=3)
    assert check_weights(io.BytesIO(ours), len(ours)) == 8
    loaded = safetensors_numpy.load(ours)
    assert loaded["base_model.model.model.layers.1.self_attn.v_proj.lora_B.weight"].shape == (32, 4)
    theirs = safetensors_numpy.save(
        {
            "m.lora_A.weight": np.zeros((4, 16), dtype=np.float16),
            "m.lora_B.weight": np.ones((16, 4), dtype=np.float32),
        }
    )
    assert check_weights(io.BytesIO(theirs), len(theirs)) == 2


def test_a_config_is_read_for_what_the_hub_records() -> None:
    config = read_config(json.dumps(adapter_config(rank=8)).encode())
    assert (config.base_model, config.rank, config.lora_alpha) == ("local/smollm2-135m", 8, 32)
    assert config.target_modules == ["q_proj", "v_proj"]
    regex = read_config(json.dumps(adapter_config(target_modules=".*proj")).encode())
    assert regex.target_modules == [".*proj"]


@pytest.mark.parametrize(
    ("raw", "message"),
    [
        (b"{not json", "is not JSON"),
        (b"[1, 2]", "is not a JSON object"),
        (json.dumps(adapter_config(peft_type="IA3")).encode(), "only LoRA adapters"),
        (json.dumps(adapter_config(rank=0)).encode(), "r = 0"),
        (json.dumps(adapter_config(rank=True)).encode(), "r = True"),
        (json.dumps(adapter_config(target_modules=[])).encode(), "target_modules"),
        (json.dumps(adapter_config(lora_alpha="x")).encode(), "lora_alpha"),
        (json.dumps(adapter_config(base_model=7)).encode(), "base_model_name_or_path"),
        (b" " * (256 * 1024 + 1), "a few KB"),
    ],
)
def test_a_broken_config_is_refused(raw: bytes, message: str) -> None:
    with pytest.raises(InvalidUpload, match=message):
        read_config(raw)


F32_2 = {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]}


@pytest.mark.parametrize(
    ("data", "message"),
    [
        (b"\x01\x02", "not a safetensors file"),
        (struct.pack("<Q", 10**9) + b"{}", "header in a"),
        (struct.pack("<Q", 4) + b"nope", "header is not JSON"),
        (with_header({"a.lora_A.w": F32_2}, b"\0" * 4), "truncated or corrupt"),
        (with_header({"a.lora_A.w": F32_2}, b"\0" * 12), "no tensor names"),
        (
            with_header({"a.lora_A.w": {**F32_2, "data_offsets": [0, 12]}}, b"\0" * 12),
            "not what its shape holds",
        ),
        (
            with_header({"a.lora_A.w": {**F32_2, "data_offsets": [4, 12]}}, b"\0" * 12),
            "truncated or corrupt",
        ),
        (with_header({"a.lora_A.w": {**F32_2, "dtype": "Q4"}}, b"\0" * 8), "dtype"),
        (with_header({"a.lora_A.w": {**F32_2, "shape": [-2]}}, b"\0" * 8), "malformed"),
        (with_header({"a.lora_A.w": [1]}, b"\0" * 8), "dtype"),
        (with_header({"embed.weight": F32_2}, b"\0" * 8), "no LoRA weights"),
    ],
)
def test_broken_weights_are_refused(data: bytes, message: str) -> None:
    assert message in weights_refusal(data)
