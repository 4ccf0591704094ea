"""`local/<name>`: a chat model run in this process with torch + transformers on CPU.

It makes `prime eval run` work offline on a fresh machine. Concurrent rollouts are batched:
requests arriving within a few milliseconds (and all that arrive while a batch is generating)
are left-padded and decoded together with a KV cache, each leaving the batch as soon as it
ends (decode.py), which on CPU gives several times the throughput of one request at a
time. Generation runs in a worker thread so the event loop keeps scoring and
writing results meanwhile. Token ids and per-token logprobs are returned, like vLLM with
`--logprobs-mode processed_logprobs`: the logprob of each sampled token under the distribution
it was sampled from (temperature applied), and a stop string cuts the ids as well as the text,
so the ids are exactly what was sampled up to the stop.

Requests that arrive while a batch decodes join it between two tokens (with the same
sampling settings, no seed, up to `max_batch` rows), and each reply is delivered as its row
ends, not when the batch does.

`prime train`'s torch backend reuses this client with its own (LoRA) model: it passes a
`loader`, swaps weights between batches inside `exclusive()` (no request joins the batch in
flight meanwhile, so the swap waits only for the rows already decoding), and sets
`policy_version`, which every response then carries.

torch is imported here only, and this module only when a local model is asked for.
"""

from __future__ import annotations

import asyncio
import dataclasses
import os
import threading
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from local_model.models import load_local_model
from prime_env.chat_template import assistant_message, bridge_ids, prompt_ids
from prime_env.clients.base import ChatResponse, Message, SamplingArgs, ToolSpec, Usage
from prime_env.errors import ModelError

DEFAULT_MAX_TOKENS = 256


@dataclass
class _Job:
    messages: list[Message]
    tools: list[ToolSpec] | None
    sampling: SamplingArgs
    future: asyncio.Future[ChatResponse] = field(repr=False)
    prompt_ids: list[int] | None = None
    """Given by a caller continuing an earlier turn token for token (`chat_ids`)."""

    def batch_key(self) -> tuple[Any, ...]:
        s = self.sampling
        return (s.temperature, s.top_p, s.seed)


class LocalClient:
    """A ModelClient over a transformers model loaded from a GGUF file shipped in a wheel."""

    provider = "local"
    base_url: str | None = None

    def __init__(
        self,
        name: str = "smollm2-135m",
        *,
        max_batch: int = 32,
        batch_window_ms: float = 5.0,
        threads: int | None = None,
        loader: Callable[[], tuple[Any, Any]] | None = None,
    ) -> None:
        self.model = name if loader is not None else f"local/{name}"
        self._name = name
        self.max_batch = max_batch
        self.batch_window_s = batch_window_ms / 1000
        # One thread by default: on a shared or small machine, OpenMP threads spinning against
        # other processes make generation many times slower; PRIME_LOCAL_THREADS raises it.
        self.threads = threads or int(os.environ.get("PRIME_LOCAL_THREADS", "1"))
        self._pending: list[_Job] = []
        self._pending_lock = threading.Lock()
        """Guards `_pending`: the event loop adds jobs, the worker thread takes joiners."""
        self._hold = threading.Event()
        """Set while someone waits in `exclusive()`: no request joins the batch in flight."""
        self._drainer: asyncio.Task[None] | None = None
        self._loading: asyncio.Task[None] | None = None
        self._tokenizer: Any = None
        self._model: Any = None
        self._loader = loader
        self.lock = threading.Lock()
        """Held while a batch generates; whoever swaps the weights takes it too."""
        self._closing = threading.Event()
        """Set by `aclose`: the batch generating stops at its next token, none starts after."""
        self.policy_version: int | None = None
        self.batches: list[int] = []  # sizes of the batches generated, for tests and tuning
        self.joined = 0  # requests that joined a batch already decoding

    def _load(self) -> None:
        import torch

        torch.set_num_threads(self.threads)
        if self._loader is not None:
            self._model, self._tokenizer = self._loader()
            return
        self._model, self._tokenizer = load_local_model(self._name)

    async def ensure_loaded(self) -> None:
        """Load the model (once, in a thread); ModelError if it cannot be loaded."""
        if self._model is not None:
            return
        if self._loading is None:
            self._loading = asyncio.ensure_future(asyncio.to_thread(self._load))
        try:
            await asyncio.shield(self._loading)
        except Exception as exc:
            raise ModelError("local_model_unavailable", f"cannot load {self.model}: {exc}") from exc

    async def chat(
        self,
        messages: list[Message],
        *,
        tools: list[ToolSpec] | None = None,
        sampling: SamplingArgs | None = None,
    ) -> ChatResponse:
        return await self._submit(messages, tools, sampling, None)

    async def chat_ids(
        self,
        prompt_ids: list[int],
        messages: list[Message],
        *,
        tools: list[ToolSpec] | None = None,
        sampling: SamplingArgs | None = None,
    ) -> ChatResponse:
        """`chat` from the prompt's token ids (a turn continuing an earlier one exactly)."""
        return await self._submit(messages, tools, sampling, list(prompt_ids))

    def bridge(
        self, completion_ids: list[int], messages: list[Message], tools: list[ToolSpec] | None
    ) -> list[int] | None:
        if self._tokenizer is None:
            return None
        return bridge_ids(self._tokenizer, completion_ids, messages, tools)

    async def _submit(
        self,
        messages: list[Message],
        tools: list[ToolSpec] | None,
        sampling: SamplingArgs | None,
        prompt_ids: list[int] | None,
    ) -> ChatResponse:
        await self.ensure_loaded()
        future: asyncio.Future[ChatResponse] = asyncio.get_running_loop().create_future()
        with self._pending_lock:
            self._pending.append(
                _Job(messages, tools, sampling or SamplingArgs(), future, prompt_ids)
            )
        if self._drainer is None or self._drainer.done():
            self._drainer = asyncio.create_task(self._drain())
        return await future

    @contextmanager
    def exclusive(self) -> Iterator[None]:
        """Hold the model between batches (to swap its weights or score with it): the batch in
        flight takes no new request and ends with the rows it has; the next waits."""
        self._hold.set()
        try:
            with self.lock:
                yield
        finally:
            self._hold.clear()

    async def _drain(self) -> None:
        loop = asyncio.get_running_loop()
        while self._pending:
            await asyncio.sleep(self.batch_window_s)
            with self._pending_lock:
                batch = self._pending[: self.max_batch]
                self._pending = self._pending[self.max_batch :]
            if self._closing.is_set():
                self._fail(batch, "local_model_closed", f"{self.model} was closed")
                continue
            groups: dict[tuple[Any, ...], list[_Job]] = {}
            for job in batch:
                groups.setdefault(job.batch_key(), []).append(job)
            for jobs in groups.values():
                self.batches.append(len(jobs))
                try:
                    await asyncio.to_thread(self._generate, jobs, loop)
                except Exception as exc:  # noqa: BLE001 - a torch failure is infrastructure, not an answer
                    if self._closing.is_set():
                        self._fail(jobs, "local_model_closed", f"{self.model} was closed")
                    else:
                        self._fail(jobs, "local_model_error", repr(exc))

    @staticmethod
    def _fail(jobs: list[_Job], kind: str, message: str) -> None:
        for job in jobs:
            if not job.future.done():
                job.future.set_exception(ModelError(kind, message))

    def _joiners(self, key: tuple[Any, ...], room: int) -> list[_Job]:
        """Up to `room` pending jobs that may join a batch of `key` (worker thread)."""
        if room <= 0 or self._hold.is_set() or self._closing.is_set() or key[2] is not None:
            return []
        with self._pending_lock:
            taken = [j for j in self._pending if j.batch_key() == key][:room]
            if taken:
                self._pending = [j for j in self._pending if j not in taken]
        return taken

    def _generate(self, jobs: list[_Job], loop: asyncio.AbstractEventLoop) -> None:
        """Decode `jobs` (and those that join them) in this worker thread, resolving each
        job's future on `loop` as its row ends. `jobs` grows with the joiners, so a failure
        reaches them too."""
        import torch

        if torch.get_num_threads() != self.threads:  # `threads` may change between batches
            torch.set_num_threads(self.threads)
        with self.lock:
            version = self.policy_version

            def deliver(job: _Job, response: ChatResponse) -> None:
                reply = dataclasses.replace(response, policy_version=version)
                loop.call_soon_threadsafe(_settle, job.future, reply)

            self._generate_locked(jobs, deliver)

    def _generate_locked(
        self, jobs: list[_Job], deliver: Callable[[_Job, ChatResponse], None]
    ) -> None:
        from local_model.decode import Row, decode

        tok = self._tokenizer
        prompts: list[list[int]] = []
        limits: list[int] = []

        def rows_for(new: list[_Job]) -> list[Row]:
            rows = []
            for job in new:
                prompt = (
                    job.prompt_ids
                    if job.prompt_ids is not None
                    else prompt_ids(tok, job.messages, job.tools)
                )
                limit = job.sampling.max_tokens or DEFAULT_MAX_TOKENS
                prompts.append(prompt)
                limits.append(limit)
                rows.append(Row(prompt, limit, self._stop_check(job.sampling.stop)))
            return rows

        def admit(active: int) -> list[Row]:
            new = self._joiners(jobs[0].batch_key(), self.max_batch - active)
            self.joined += len(new)
            jobs.extend(new)
            return rows_for(new)

        def finished(index: int, tokens: list[int], logprobs: list[float]) -> None:
            job = jobs[index]
            deliver(job, self._response(job, prompts[index], tokens, logprobs, limits[index]))

        first = jobs[0].sampling
        pad = tok.pad_token_id if tok.pad_token_id is not None else tok.eos_token_id
        decode(
            self._model,
            rows_for(list(jobs)),
            pad_id=pad,
            eos_id=tok.eos_token_id,
            temperature=1.0 if first.temperature is None else first.temperature,
            top_p=first.top_p or 1.0,
            seed=first.seed,
            # a delivered or cancelled request's future is done: stop once none is waited for
            should_stop=lambda: self._closing.is_set() or all(j.future.done() for j in jobs),
            admit=admit,
            finished=finished,
        )

    def _stop_check(self, stops: list[str] | None) -> Callable[[list[int]], bool] | None:
        """A row may stop decoding once one of its stop strings shows in the text so far."""
        if not stops:
            return None
        return lambda tokens: _first_stop(self._decode(tokens), stops) is not None

    def _response(
        self, job: _Job, prompt: list[int], tokens: list[int], logprobs: list[float], limit: int
    ) -> ChatResponse:
        sampled = Sampled(tokens, logprobs, limit)
        return completion_response(
            self._tokenizer, prompt, sampled, job.sampling.stop, job.tools, self.model
        )

    def _decode(self, tokens: list[int]) -> str:
        return str(self._tokenizer.decode(tokens, skip_special_tokens=True))

    async def aclose(self) -> None:
        """Stop generating (between two tokens; waiters get `local_model_closed`) and unload.
        A batch whose every waiter was cancelled stops the same way without a close (reading
        `Future.cancelled()` from the worker thread is a plain attribute read)."""
        self._closing.set()
        if self._drainer is not None:
            await asyncio.gather(self._drainer, return_exceptions=True)
        self._model = self._tokenizer = None


@dataclass
class Sampled:
    """What an engine sampled after a prompt: tokens and their logprobs, up to `limit`."""

    tokens: list[int]
    logprobs: list[float]
    limit: int


def completion_response(
    tokenizer: Any,
    prompt: list[int],
    sampled: Sampled,
    stops: list[str] | None,
    tools: list[ToolSpec] | None,
    model: str,
) -> ChatResponse:
    """The ChatResponse of a sampled completion: cut after the EOS the model chose, or after
    the token that completed a stop string (the text before it), a tool call parsed when tools
    were offered. One rule for every engine that samples token ids (the torch one, the Lab)."""

    def decode(ids: list[int]) -> str:
        return str(tokenizer.decode(ids, skip_special_tokens=True))

    eos = tokenizer.eos_token_id
    finish = "length"
    tokens, logprobs = sampled.tokens, sampled.logprobs
    end = min(sampled.limit, len(tokens))
    if eos in tokens[:end]:
        end = tokens.index(eos) + 1  # the EOS the model chose is part of what it generated
        finish = "stop"
    tokens, logprobs = tokens[:end], logprobs[:end]
    text = decode(tokens)
    cut = _first_stop(text, stops or [])
    if cut is not None:
        # The ids end with the token that completed the stop string, as the server stopped
        # there: nothing after it was sampled as far as the caller (or a trainer) knows.
        end = next(
            k
            for k in range(1, len(tokens) + 1)
            if _first_stop(decode(tokens[:k]), stops or []) is not None
        )
        tokens, logprobs, text, finish = tokens[:end], logprobs[:end], text[:cut], "stop"
    return sampled_response(text, prompt, tokens, logprobs, finish, tools, model)


def sampled_response(
    text: str,
    prompt: list[int],
    tokens: list[int],
    logprobs: list[float],
    finish: str,
    tools: list[ToolSpec] | None,
    model: str,
) -> ChatResponse:
    """The ChatResponse of `tokens` (decoded: `text`) sampled after `prompt`: with tools
    offered, its tool calls parsed (and then it finished with `tool_calls`). Every engine that
    samples token ids answers through this, vLLM's server included."""
    message: Message = (
        assistant_message(text, lambda: f"call_{uuid.uuid4().hex[:12]}")
        if tools
        else {"role": "assistant", "content": text}
    )
    if message.get("tool_calls"):
        finish = "tool_calls"
    return ChatResponse(
        message=message,
        finish_reason=finish,
        usage=Usage(prompt_tokens=len(prompt), completion_tokens=len(tokens)),
        prompt_token_ids=list(prompt),
        completion_token_ids=tokens,
        completion_logprobs=logprobs,
        model=model,
    )


def _settle(future: asyncio.Future[ChatResponse], response: ChatResponse) -> None:
    if not future.done():
        future.set_result(response)


def _first_stop(text: str, stops: list[str]) -> int | None:
    """Where the earliest stop string starts in `text`, or None."""
    found = [text.index(stop) for stop in stops if stop and stop in text]
    return min(found) if found else None
