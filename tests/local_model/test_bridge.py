"""Token-exact multi-turn with SmolLM2's own chat template, on a case where re-tokenising the
text changes the ids: the model sampled "Hel" + "lo", which the tokenizer spells as one token.

A later turn's prompt is the earlier prompt + the sampled ids + the bridge (what the template
writes after the turn's end token, then the new messages, then the generation prompt), so the
rollout is one training sample whose mask is exactly the sampled tokens; re-rendering the
transcript would change the earlier ids and split it in two."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from prime_env import ChatResponse, Environment, MultiTurn, Rubric, Usage, run_rollouts
from prime_env.chat_template import bridge_ids, prompt_ids
from prime_env.clients.base import TokenClient
from tests.trainer_bridge.conftest import smollm2_tokenizer_dir  # noqa: F401
from trainer_bridge.orchestrator.samples import samples_from_record


@pytest.fixture(scope="module")
def tokenizer(smollm2_tokenizer_dir: Path) -> Any:  # noqa: F811
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(smollm2_tokenizer_dir)


class TemplateClient:
    """SmolLM2's template and tokenizer, with the sampled ids scripted: what a sampler would
    return, so the test decides where the tokenisation is not canonical."""

    model, provider, base_url = "smollm2-template", "test", None

    def __init__(self, tokenizer: Any, replies: list[list[int]], bridging: bool) -> None:
        self.tokenizer, self.replies, self.bridging = tokenizer, replies, bridging
        self.prompts: list[list[int]] = []

    def bridge(self, completion_ids, messages, tools):
        return (
            bridge_ids(self.tokenizer, completion_ids, messages, tools) if self.bridging else None
        )

    async def chat_ids(self, prompt, messages, *, tools=None, sampling=None) -> ChatResponse:
        return self._reply(list(prompt))

    async def chat(self, messages, *, tools=None, sampling=None) -> ChatResponse:
        return self._reply(prompt_ids(self.tokenizer, messages, tools))

    def _reply(self, prompt: list[int]) -> ChatResponse:
        self.prompts.append(prompt)
        ids = self.replies.pop(0)
        text = self.tokenizer.decode(ids, skip_special_tokens=True)
        return ChatResponse(
            {"role": "assistant", "content": text},
            "stop",
            Usage(len(prompt), len(ids)),
            prompt,
            ids,
            [-0.5] * len(ids),
        )

    async def aclose(self) -> None:
        return None


def split(tokenizer: Any, *pieces: str) -> list[int]:
    return [i for piece in pieces for i in tokenizer.encode(piece, add_special_tokens=False)]


def env() -> Environment:
    def once_more(messages, state):
        state.done = len(messages) > 3
        return "Say it again."

    tasks = [{"question": "Greet me.", "answer": "Hello"}]
    return Environment(tasks, MultiTurn(once_more, max_turns=3), Rubric([lambda completion: 1.0]))


async def test_a_later_turn_continues_the_sampled_ids_exactly(tokenizer: Any) -> None:
    eos = tokenizer.eos_token_id
    first = split(tokenizer, "Hel", "lo") + [eos]
    assert tokenizer.encode("Hello", add_special_tokens=False) != first[:-1]  # not canonical
    second = split(tokenizer, "Hello", " again") + [eos]
    client = TemplateClient(tokenizer, [first, list(second)], bridging=True)
    assert isinstance(client, TokenClient)
    [record] = await run_rollouts(env(), client)
    turn1, turn2 = record.turns
    tail = turn2.prompt_token_ids[len(turn1.prompt_token_ids) + len(first) :]
    assert turn2.prompt_token_ids[: len(turn1.prompt_token_ids) + len(first)] == (
        turn1.prompt_token_ids + first
    )
    assert tokenizer.decode(tail) == (
        "\n<|im_start|>user\nSay it again.<|im_end|>\n<|im_start|>assistant\n"
    )
    # re-rendering the transcript as text would have changed the first reply's ids
    rerendered = prompt_ids(tokenizer, record.prompt + record.completion[:2], None)
    assert rerendered != turn2.prompt_token_ids
    [sample] = samples_from_record(record, advantage=1.0)
    assert sample.input_ids == turn2.prompt_token_ids + second
    sampled = [i for i, m in zip(sample.input_ids, sample.loss_mask) if m]
    assert sampled == first + second  # the mask covers exactly the sampled tokens
    assert sum(sample.loss_mask) == len(first) + len(second)


async def test_without_the_bridge_the_retokenised_turn_starts_a_new_sample(tokenizer: Any) -> None:
    eos = tokenizer.eos_token_id
    replies = [split(tokenizer, "Hel", "lo") + [eos], split(tokenizer, "Hi") + [eos]]
    [record] = await run_rollouts(env(), TemplateClient(tokenizer, replies, bridging=False))
    assert len(samples_from_record(record, advantage=1.0)) == 2


def test_a_turn_cut_by_a_limit_is_closed_by_the_prompt(tokenizer: Any) -> None:
    cut = split(tokenizer, "Hel", "lo")  # stopped by max_tokens: no end token sampled
    tail = bridge_ids(tokenizer, cut, [{"role": "user", "content": "x"}], None)
    assert tokenizer.decode(tail) == (
        "<|im_end|>\n<|im_start|>user\nx<|im_end|>\n<|im_start|>assistant\n"
    )
    tool = [{"role": "tool", "tool_call_id": "c", "content": "42"}]
    tools = [{"type": "function", "function": {"name": "f", "parameters": {"type": "object"}}}]
    tail = bridge_ids(tokenizer, cut + [tokenizer.eos_token_id], tool, tools)
    assert tokenizer.decode(tail) == (
        "\n<|im_start|>tool\n<tool_response>\n42\n</tool_response><|im_end|>\n"
        "<|im_start|>assistant\n"
    )
