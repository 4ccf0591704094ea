"""Teachers' logprobs of the student's tokens: a local torch teacher (a policy directory), and
an OpenAI-compatible `/v1/completions` with `echo` + `logprobs` in vLLM's wire format (the fake
server, its prompt logprobs computed by a real torch model), which must agree; a server that
does not echo them, or scores other tokens, stops with a clear message."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from testing.behaviour import FaultPlan
from testing.http_server import serve
from testing.providers import FakeOpenAI
from tests.trainer_bridge.conftest import smollm2_tokenizer_dir, tiny_model_dir  # noqa: F401
from trainer_bridge.config import ModelConfig, TeacherConfig
from trainer_bridge.inference.local_teacher import LocalTeacher
from trainer_bridge.inference.teachers import CompletionsScorer, TeacherError

IDS = [1, 9690, 198, 2683, 359, 253, 5356, 2]


def torch_scorer(model_dir: Path) -> Any:
    import torch
    from transformers import AutoModelForCausalLM

    return torch_scorer_of(AutoModelForCausalLM.from_pretrained(model_dir, dtype=torch.float32))


def torch_scorer_of(model: Any) -> Any:
    """Teacher-forced logprobs of ids[1:] under `model`, as the trainer computes them."""
    import torch

    from trainer_bridge.trainer.modeling import right_pad, token_logprobs

    model.eval()

    def score(ids: list[int]) -> list[float]:
        with torch.inference_mode():
            padded = right_pad([ids], 0, torch.device("cpu"))
            values, _ = token_logprobs(model, padded.input_ids, padded.attention_mask)
        return [float(x) for x in values[0, 1 : len(ids)]]

    return score


async def test_a_vllm_style_server_and_the_local_teacher_give_the_same_logprobs(
    tiny_model_dir: Path,  # noqa: F811
) -> None:
    teacher = LocalTeacher(TeacherConfig(model=str(tiny_model_dir)), ModelConfig())
    local = await teacher.logprobs(IDS)
    await teacher.close()
    assert len(local) == len(IDS) - 1 and all(x < 0 for x in local)

    fake = FakeOpenAI(FaultPlan(), None, scorer=torch_scorer(tiny_model_dir))
    server = await serve(fake, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    try:
        cfg = TeacherConfig(model="tiny", base_url=f"http://127.0.0.1:{port}/v1")
        scorer = CompletionsScorer(cfg)
        remote = await scorer.logprobs(IDS)
        await scorer.close()
    finally:
        server.close()
    assert remote == pytest.approx(local, abs=1e-5)


async def _scoring_refused(fake: FakeOpenAI, match: str) -> None:
    """A scorer of `fake`, served on loopback, raises a TeacherError matching `match`."""
    server = await serve(fake, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    try:
        scorer = CompletionsScorer(TeacherConfig(model="m", base_url=f"http://127.0.0.1:{port}/v1"))
        with pytest.raises(TeacherError, match=match):
            await scorer.logprobs(IDS)
        await scorer.close()
    finally:
        server.close()


async def test_a_server_that_does_not_echo_prompt_logprobs_is_a_clear_error() -> None:
    fake = FakeOpenAI(FaultPlan(), None)  # no scorer: it answers /completions with a 400
    await _scoring_refused(fake, "answered 400.*opd needs /v1/completions with echo")


async def test_a_server_scoring_other_tokens_is_refused() -> None:
    def shifted(ids: list[int]) -> list[float]:
        return [-1.0] * (len(ids) - 1)

    class Retokenising(FakeOpenAI):
        def answer(self, body: dict[str, Any], out: Any, malformed: bool) -> None:
            super().answer({**body, "prompt": [i + 1 for i in body["prompt"]]}, out, malformed)

    await _scoring_refused(
        Retokenising(FaultPlan(), None, scorer=shifted), "must share the student's tokenizer"
    )


async def test_an_adapter_directory_teaches_on_the_students_base(
    tmp_path: Path,
    tiny_model_dir: Path,  # noqa: F811
) -> None:
    """`prime train export`'s adapter form: a PEFT adapter whose base is the student's model."""
    import torch
    from peft import LoraConfig, get_peft_model
    from transformers import AutoModelForCausalLM

    torch.manual_seed(1)
    base = AutoModelForCausalLM.from_pretrained(tiny_model_dir, dtype=torch.float32)
    peft = get_peft_model(
        base, LoraConfig(r=4, target_modules=["q_proj", "v_proj"], init_lora_weights=False)
    )
    peft.save_pretrained(tmp_path / "adapter")
    teacher = LocalTeacher(
        TeacherConfig(model=str(tmp_path / "adapter")), ModelConfig(name=str(tiny_model_dir))
    )
    adapted = await teacher.logprobs(IDS)
    await teacher.close()
    assert adapted == pytest.approx(torch_scorer_of(peft.eval())(IDS), abs=1e-5)
    assert adapted != pytest.approx(torch_scorer(tiny_model_dir)(IDS), abs=1e-3)  # not the base
