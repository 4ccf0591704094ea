"""PEFT LoRA adapters as files: the two an adapter directory holds, and the checks one passes
before the hub stores it or the CLI sends it.

An adapter is what `save_pretrained` of a peft model writes, `prime train export` and
`prime lab export` too: `adapter_config.json` (a JSON object, `peft_type` LORA, its rank `r`,
`lora_alpha`, `target_modules`, `base_model_name_or_path`) and `adapter_model.safetensors`
(an 8-byte little-endian header length, a JSON header naming each tensor's dtype, shape and
byte range, then the bytes; https://github.com/huggingface/safetensors). The weights are
read only as far as their header: every tensor must lie inside the file, sized as its dtype
and shape say, the tensors covering the data without gaps or overlaps, as the safetensors
library itself demands when it loads them.
"""

from __future__ import annotations

import io
import json
import math
import struct
import tarfile
from collections.abc import Mapping
from dataclasses import dataclass
from typing import IO, Any, TypeGuard

from registry_index.errors import InvalidUpload

CONFIG = "adapter_config.json"
WEIGHTS = "adapter_model.safetensors"
FILES = (CONFIG, WEIGHTS)
MAX_CONFIG_BYTES = 256 * 1024
# The safetensors library refuses a header over 100 MB; ours are a few KB per layer.
MAX_HEADER_BYTES = 100_000_000
_DTYPE_BYTES = {
    "F64": 8, "F32": 4, "F16": 2, "BF16": 2, "F8_E4M3": 1, "F8_E5M2": 1,
    "I64": 8, "I32": 4, "I16": 2, "I8": 1, "U64": 8, "U32": 4, "U16": 2, "U8": 1, "BOOL": 1,
}  # fmt: skip


@dataclass(frozen=True)
class AdapterConfig:
    """What the hub records of an adapter's `adapter_config.json`."""

    base_model: str | None
    rank: int
    lora_alpha: float | None
    target_modules: list[str]


def read_config(data: bytes) -> AdapterConfig:
    """The LoRA settings of `adapter_config.json`'s bytes; InvalidUpload saying what is wrong."""
    if len(data) > MAX_CONFIG_BYTES:
        raise InvalidUpload(
            f"{CONFIG} is {len(data)} bytes; a PEFT adapter's is a few KB (at most "
            f"{MAX_CONFIG_BYTES})."
        )
    try:
        raw = json.loads(data)
    except (UnicodeDecodeError, ValueError) as error:
        raise InvalidUpload(f"{CONFIG} is not JSON ({error}).") from None
    if not isinstance(raw, dict):
        raise InvalidUpload(f"{CONFIG} is not a JSON object.")
    peft_type = raw.get("peft_type")
    if peft_type != "LORA":
        raise InvalidUpload(
            f"{CONFIG} has peft_type {peft_type!r}; only LoRA adapters (peft_type 'LORA', as "
            "peft's save_pretrained writes) are accepted."
        )
    rank = raw.get("r")
    if not isinstance(rank, int) or isinstance(rank, bool) or not 0 < rank <= 65536:
        raise InvalidUpload(f"{CONFIG} has r = {rank!r}; the LoRA rank is a positive integer.")
    alpha = raw.get("lora_alpha")
    if alpha is not None and (not isinstance(alpha, int | float) or isinstance(alpha, bool)):
        raise InvalidUpload(f"{CONFIG} has lora_alpha = {alpha!r}; it is a number.")
    modules = raw.get("target_modules")
    if isinstance(modules, str):
        modules = [modules]  # peft takes a regular expression as well as a list
    if not isinstance(modules, list) or not modules or not all(isinstance(m, str) for m in modules):
        raise InvalidUpload(
            f"{CONFIG} has target_modules = {modules!r}; it names the adapted modules "
            "(a list of names, or a regular expression)."
        )
    base = raw.get("base_model_name_or_path")
    if base is not None and not isinstance(base, str):
        raise InvalidUpload(f"{CONFIG} has base_model_name_or_path = {base!r}; it is a string.")
    return AdapterConfig(base or None, rank, alpha, sorted(modules))


def check_weights(handle: IO[bytes], size: int) -> int:
    """Check the safetensors file open as `handle` (`size` bytes long) as a LoRA adapter's
    weights; its number of tensors. InvalidUpload saying what is wrong."""
    if size < 8:
        raise InvalidUpload(f"{WEIGHTS} is {size} bytes long: not a safetensors file.")
    (header_len,) = struct.unpack("<Q", handle.read(8))
    if not 2 <= header_len <= min(size - 8, MAX_HEADER_BYTES):
        raise InvalidUpload(
            f"{WEIGHTS} declares a {header_len}-byte header in a {size}-byte file: not a "
            "safetensors file (write it with safetensors, e.g. peft's save_pretrained)."
        )
    try:
        header = json.loads(handle.read(header_len))
    except (UnicodeDecodeError, ValueError):
        raise InvalidUpload(f"{WEIGHTS}'s header is not JSON: not a safetensors file.") from None
    if not isinstance(header, dict):
        raise InvalidUpload(f"{WEIGHTS}'s header is not a JSON object: not a safetensors file.")
    header.pop("__metadata__", None)
    spans = sorted(_span(name, entry) for name, entry in header.items())
    data_size, end = size - 8 - header_len, 0
    for begin, stop, name in spans:
        if begin != end or stop > data_size:
            raise InvalidUpload(
                f"{WEIGHTS}: tensor {name!r} lies at bytes {begin}..{stop} where the data "
                f"continues at {end} of {data_size}: the file is truncated or corrupt."
            )
        end = stop
    if end != data_size:
        raise InvalidUpload(
            f"{WEIGHTS} has {data_size - end} bytes no tensor names: the file is corrupt."
        )
    if not any(".lora_A." in name for _begin, _stop, name in spans):
        raise InvalidUpload(
            f"{WEIGHTS} holds no LoRA weights (no '….lora_A.…' tensor): not a LoRA adapter."
        )
    return len(spans)


def _span(name: str, entry: Any) -> tuple[int, int, str]:
    """(begin, end, name) of one header entry, whose size its dtype and shape must match."""
    entry = entry if isinstance(entry, dict) else {}
    dtype, shape, offsets = entry.get("dtype"), entry.get("shape"), entry.get("data_offsets")
    if dtype not in _DTYPE_BYTES:
        raise InvalidUpload(f"{WEIGHTS}: tensor {name!r} has no known dtype ({dtype!r}).")
    if not (_naturals(shape) and _naturals(offsets) and len(offsets) == 2):
        raise InvalidUpload(
            f"{WEIGHTS}: tensor {name!r} has a malformed shape or data_offsets: not a "
            "safetensors file."
        )
    begin, end = offsets
    if end - begin != math.prod(shape) * _DTYPE_BYTES[dtype]:
        raise InvalidUpload(
            f"{WEIGHTS}: tensor {name!r} ({dtype}, shape {shape}) spans {end - begin} bytes, "
            "not what its shape holds: the file is corrupt."
        )
    return begin, end, name


def _naturals(value: Any) -> TypeGuard[list[int]]:
    """A JSON list of non-negative integers."""
    return isinstance(value, list) and all(
        isinstance(n, int) and not isinstance(n, bool) and n >= 0 for n in value
    )


def tar_files(files: Mapping[str, bytes]) -> bytes:
    """`files` (name -> bytes) as one uncompressed tar: how an adapter directory travels as a
    blob (a Lab checkpoint: the adapter's files and its optimizer state)."""
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w") as tar:
        for name, data in files.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    return buffer.getvalue()
