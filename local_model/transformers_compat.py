"""Names transformers changed between the releases the project supports (its floor in
sdk/pyproject.toml up to the version scripts/constraints.txt pins): one home for each, so no
caller reads a name that one of those releases lacks.

The KV cache: transformers 5.2x calls a model's cache argument and output field `cache`;
earlier 5.x releases (5.17 on a GPU image, for one) call both `past_key_values`, and accept
any unknown keyword silently, so passing the wrong name drops the cache without an error.
"""

from __future__ import annotations

import inspect
from typing import Any


def cache_keyword(module: Any) -> str:
    """The name under which `module`'s forward pass takes a KV cache (a *ForCausalLM, its
    decoder, or either under a peft wrapper)."""
    base = module.get_base_model() if hasattr(module, "get_base_model") else module
    parameters = inspect.signature(base.forward).parameters
    return "cache" if "cache" in parameters else "past_key_values"


def output_cache(output: Any) -> Any:
    """The KV cache a forward pass with `use_cache=True` returned, whichever name it has."""
    cache = getattr(output, "cache", None)
    return cache if cache is not None else output.past_key_values
