"""The `lab` backend: rollouts sampled by a hub's Lab through the `tinker` SDK (`--lab URL`).

Chats are rendered to token ids here, by the model's own tokenizer (prime_env.chat_template,
as the torch and vLLM engines do), and sampled by the Lab's sampling client of the newest
policy: the base model at version 0, then the `tinker://…/sampler_weights/step_N` each
broadcast names (`PolicyRef.lab_path`, written by trainer_bridge.lab.trainer). Concurrent
requests for the same prompt and settings (a group's rollouts) go as one `sample` with
`num_samples` = their count: the Lab decodes them as one batch. The probe is the Lab's own
`compute_logprobs` (prompt logprobs) of the policy's sampler.

The logprobs are the model's own, before temperature (the Lab's sampler and its forward
agree on them; trainer_bridge.lab.datums says what that means for the loss).
"""

from __future__ import annotations

import asyncio
from collections import defaultdict
from dataclasses import dataclass, field, replace
from typing import Any

import tinker
from tinker import types

from hub_client.client import HubError
from hub_client.lab import lab_models, tinker_key
from local_model.client import DEFAULT_MAX_TOKENS, Sampled, completion_response
from prime_env.chat_template import bridge_ids, prompt_ids
from prime_env.clients.base import ChatResponse, Message, RenderingClient, SamplingArgs, ToolSpec
from trainer_bridge.lab.connect import quiet_queue_waits
from trainer_bridge.protocol.policy import PolicyError, PolicyRef

BASE_VERSION = 0
PROBE_TOLERANCE = 1e-3
"""Trainer and sampler are the Lab's one engine (its forward, its prompt logprobs): they agree
to ~1e-6 in float32; one step moves SmolLM2's probe by 0.12-0.58."""
MAX_SAMPLES = 64  # the Lab's own cap on num_samples
quiet_queue_waits()


@dataclass
class _Waiting:
    """Requests for one (policy, prompt, settings), answered by one `sample` call."""

    futures: list[asyncio.Future[types.SampledSequence]] = field(default_factory=list)


class LabBackend:
    """InferenceBackend over a Lab's sampling clients (see inference/base.py)."""

    probe_tolerance = PROBE_TOLERANCE

    def __init__(self, base_model: str, url: str, key: str, tokenizer: Any) -> None:
        self.base_model = base_model
        self.url = url
        self.key = key
        self.tokenizer = tokenizer
        self.service = tinker.ServiceClient(base_url=url, api_key=tinker_key(key))
        self.sampler: Any = self.service.create_sampling_client(base_model=base_model).result()
        self.version = BASE_VERSION
        self._waiting: dict[tuple[Any, ...], _Waiting] = defaultdict(_Waiting)

    def client(self) -> LabClient:
        return LabClient(self)

    async def publish(self, policy: PolicyRef) -> None:
        if policy.lab_path is None:
            raise PolicyError(f"policy {policy.version} was not trained on a Lab (no lab_path)")
        if policy.version <= self.version:
            raise PolicyError(f"policy {policy.version} is not newer than {self.version}")
        path = policy.lab_path
        self.sampler = await asyncio.to_thread(
            lambda: self.service.create_sampling_client(model_path=path).result()
        )
        self.version = policy.version

    def served_versions(self) -> set[int]:
        return {self.version}

    async def score(self, version: int, token_ids: list[int]) -> list[float]:
        if version != self.version:
            raise PolicyError(f"policy {version} is not served (serving {self.version})")
        logprobs = await self.sampler.compute_logprobs(types.ModelInput.from_ints(token_ids))
        return [float(x) for x in logprobs[1:]]

    async def health(self) -> bool:
        try:
            await asyncio.to_thread(lab_models, self.url, self.key)
        except HubError:
            return False
        return True

    async def close(self) -> None:
        """End the SDK's session (the Lab keeps the run's checkpoints)."""
        await asyncio.to_thread(lambda: self.service.close("success").result(timeout=10))

    # --- sampling: a group's requests as one call ------------------------------------------
    async def sample(self, prompt: list[int], params: types.SamplingParams) -> Any:
        """One sequence for `prompt` under the newest policy, joined with the other requests
        for the same prompt and settings made in the same turn of the event loop."""
        key = (self.version, tuple(prompt), params.model_dump_json())
        waiting = self._waiting[key]
        future: asyncio.Future[types.SampledSequence] = asyncio.get_running_loop().create_future()
        waiting.futures.append(future)
        if len(waiting.futures) == 1:
            asyncio.get_running_loop().call_soon(self._flush, key, self.sampler, prompt, params)
        return await future

    def _flush(self, key: tuple[Any, ...], sampler: Any, prompt: list[int], params: Any) -> None:
        futures = self._waiting.pop(key).futures
        for start in range(0, len(futures), MAX_SAMPLES):
            part = futures[start : start + MAX_SAMPLES]
            asyncio.ensure_future(self._answer(sampler, prompt, params, part))

    @staticmethod
    async def _answer(
        sampler: Any, prompt: list[int], params: Any, futures: list[asyncio.Future[Any]]
    ) -> None:
        try:
            response = await sampler.sample(
                types.ModelInput.from_ints(prompt), len(futures), params
            )
        except Exception as exc:  # noqa: BLE001 - every waiter gets the Lab's failure
            for future in futures:
                if not future.done():
                    future.set_exception(exc)
            return
        for future, sequence in zip(futures, response.sequences, strict=True):
            if not future.done():
                future.set_result(sequence)


class LabClient(RenderingClient):
    """A prime_env model client over the backend; responses carry the policy that sampled
    them, and a later turn may continue an earlier one token for token (a `TokenClient`)."""

    provider = "lab"

    def __init__(self, backend: LabBackend) -> None:
        self.backend = backend
        self.model = backend.base_model
        self.base_url: str | None = backend.url

    async def render(self, messages: list[Message], tools: list[ToolSpec] | None) -> list[int]:
        return prompt_ids(self.backend.tokenizer, messages, tools)

    async def sample(
        self, prompt_ids: list[int], tools: list[ToolSpec] | None, sampling: SamplingArgs
    ) -> ChatResponse:
        limit = sampling.max_tokens or DEFAULT_MAX_TOKENS
        params = types.SamplingParams(
            max_tokens=limit,
            temperature=1.0 if sampling.temperature is None else sampling.temperature,
            top_p=1.0 if sampling.top_p is None else sampling.top_p,
            seed=sampling.seed,
            stop=list(sampling.stop) if sampling.stop else None,
        )
        version = self.backend.version
        sequence = await self.backend.sample(prompt_ids, params)
        sampled = Sampled(list(sequence.tokens), [float(x) for x in sequence.logprobs], limit)
        response = completion_response(
            self.backend.tokenizer, prompt_ids, sampled, sampling.stop, tools, self.model
        )
        return replace(response, policy_version=version)

    def bridge(
        self, completion_ids: list[int], messages: list[Message], tools: list[ToolSpec] | None
    ) -> list[int] | None:
        return bridge_ids(self.backend.tokenizer, completion_ids, messages, tools)
