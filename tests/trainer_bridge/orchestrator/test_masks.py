"""Acceptance 1, masks: whole rollouts through prime_env's runner and real harnesses become
samples whose loss mask covers exactly the sampled tokens (Σ mask = Σ completion ids) and
never a tool result, env reply or template token."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from prime_env import ChatResponse, Environment, MultiTurn, Rubric, Task, ToolLoop, Usage
from prime_env.chat_template import template_messages
from prime_env.clients.base import SamplingArgs
from prime_env.runner import run_rollouts
from trainer_bridge.config import ModelConfig
from trainer_bridge.inference.torch_backend import TorchBackend
from trainer_bridge.orchestrator.samples import samples_from_record
from trainer_bridge.protocol.batches import TrainSample

TOOL_RESULT = "The population of Paris is 2,102,650 (2023)."


def looked_up(completion: list[dict[str, Any]]) -> float:
    return float(any(m.get("role") == "tool" for m in completion))


def masked_in(samples: list[TrainSample]) -> list[int]:
    return [t for s in samples for t, m in zip(s.input_ids, s.loss_mask) if m]


class TokenServer:
    """A test double of a model server that returns token ids (vLLM with
    --return-tokens-as-token-ids): prompts are rendered with SmolLM2's real chat template and
    tokenizer; the replies are scripted text, tokenised as the model would have sampled them."""

    model = "token-server"
    provider = "scripted"
    base_url = None

    def __init__(self, tokenizer: Any, replies: list[dict[str, Any]]) -> None:
        self.tokenizer = tokenizer
        self.replies = replies

    async def chat(
        self,
        messages: list[dict[str, Any]],
        *,
        tools: list[dict[str, Any]] | None = None,
        sampling: SamplingArgs | None = None,
    ) -> ChatResponse:
        prompt = list(
            self.tokenizer.apply_chat_template(
                template_messages(messages),
                tools=tools or None,
                add_generation_prompt=True,
                tokenize=True,
                return_dict=False,
            )
        )
        message = self.replies.pop(0)
        [text] = [m["content"] for m in template_messages([message])]
        completion = self.tokenizer(text, add_special_tokens=False).input_ids
        completion.append(self.tokenizer.eos_token_id)
        return ChatResponse(
            message=message,
            finish_reason="tool_calls" if message.get("tool_calls") else "stop",
            usage=Usage(len(prompt), len(completion)),
            prompt_token_ids=prompt,
            completion_token_ids=completion,
            completion_logprobs=[-0.5] * len(completion),
            policy_version=3,
        )

    async def aclose(self) -> None:
        return None


def population(city: str) -> str:
    """Look up a city's population."""
    return TOOL_RESULT


async def test_tool_loop_masks_only_sampled_tokens(smollm2_tokenizer_dir: Path) -> None:
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(smollm2_tokenizer_dir)
    call = {"name": "population", "arguments": {"city": "Paris"}}
    replies = [
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {
                    "id": "call_1",
                    "type": "function",
                    "function": {"name": "population", "arguments": json.dumps(call["arguments"])},
                }
            ],
        },
        {"role": "assistant", "content": "About 2.1 million people live in Paris."},
    ]
    env = Environment(
        [Task(prompt=[{"role": "user", "content": "How many people live in Paris?"}])],
        ToolLoop([population], max_turns=4),
        Rubric([looked_up]),
        name="t/tools",
    )
    [record] = await run_rollouts(env, TokenServer(tokenizer, replies), r=1)
    assert record.error is None and record.reward == 1.0 and len(record.turns or []) == 2
    samples = samples_from_record(record, advantage=1.0)
    sampled = sum(len(t.completion_token_ids or []) for t in record.turns or [])
    assert sum(s.num_loss_tokens for s in samples) == sampled
    trained_text = tokenizer.decode(masked_in(samples))
    assert "2,102,650" not in trained_text and "<|im_start|>" not in trained_text
    assert "population" in trained_text and "2.1 million" in trained_text
    everything = tokenizer.decode([t for s in samples for t in s.input_ids])
    assert "2,102,650" in everything  # the tool result is in the sequence, masked out
    assert all(s.policy_version == 3 for s in samples)


async def test_multi_turn_with_the_torch_sampler(tiny_model_dir: Path) -> None:
    backend = TorchBackend(ModelConfig(name=str(tiny_model_dir)))
    env = Environment(
        [Task(prompt=[{"role": "user", "content": f"Guess my number ({i})."}]) for i in range(2)],
        MultiTurn(lambda messages, state: "Wrong, try again.", max_turns=3),
        Rubric([lambda completion: float(len(completion) % 2)]),
        name="t/guess",
    )
    sampling = SamplingArgs(max_tokens=6, temperature=1.0)
    records = await run_rollouts(env, backend.client(), r=2, sampling=sampling)
    tokenizer = backend.tokenizer
    await backend.close()
    assert len(records) == 4
    for record in records:
        turns = record.turns or []
        assert record.error is None and len(turns) == 3
        samples = samples_from_record(record, advantage=0.5, temperature=1.0)
        assert sum(s.num_loss_tokens for s in samples) == sum(
            len(t.completion_token_ids or []) for t in turns
        )
        assert masked_in(samples) == [t for turn in turns for t in turn.completion_token_ids or []]
        assert "Wrong, try again" not in tokenizer.decode(masked_in(samples))
        for sample in samples:  # sampled positions carry the sampler's logprobs, others 0
            for m, lp in zip(sample.loss_mask, sample.sampler_logprobs):
                assert (lp < 0) if m else (lp == 0)
