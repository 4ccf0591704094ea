"""`local/<name>` reaches local_model through the `prime.model_providers` entry point, and
resolving it (or listing the choices) imports no torch."""

from __future__ import annotations

import subprocess
import sys
from importlib import metadata

import pytest

from local_model.client import LocalClient
from local_model.provider import PROVIDER
from prime_env.clients.model_specs import PROVIDER_GROUP, ModelConfigError, resolve_model


def test_the_sdk_distribution_registers_the_local_provider() -> None:
    (entry,) = [ep for ep in metadata.entry_points(group=PROVIDER_GROUP) if ep.name == "local"]
    assert entry.dist is not None and entry.dist.name == "prime-envhub-sdk"
    assert entry.load() is PROVIDER


def test_a_local_model_string_makes_a_local_client() -> None:
    spec = resolve_model("local/smollm2-135m")
    assert (spec.provider, spec.client, spec.model, spec.key_var) == (
        "local",
        "local",
        "smollm2-135m",
        None,
    )
    assert spec.cost(1_000_000, 1_000_000) == 0.0
    client = spec.create_client()  # the weights load on the first chat, not here
    assert isinstance(client, LocalClient) and client.model == "local/smollm2-135m"


def test_an_unknown_local_model_lists_the_provider_s_models() -> None:
    with pytest.raises(
        ModelConfigError, match=r"unknown local model 'gpt-9'; available: local/smo"
    ):
        resolve_model("local/gpt-9")


def test_resolving_a_local_model_imports_no_torch() -> None:
    code = (
        "import sys\n"
        "from prime_env.clients.model_specs import resolve_model\n"
        "resolve_model('local/smollm2-135m')\n"
        "print(sorted({'torch', 'transformers', 'local_model.client'} & set(sys.modules)))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"
