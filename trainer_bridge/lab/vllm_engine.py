"""The Lab's vLLM engine: the torch engine trains, one vLLM server beside it samples.

`prime hub serve --lab --lab-engine vllm`. `TorchLabEngine` holds every adapter and does all
the training, checkpoints included; a vLLM server of ours (engines.vllm_server's command line,
started with the hub, dying with it) holds a second copy of the base weights and samples. An
adapter goes to the server when it is first sampled after it last changed: exported as a PEFT
directory and hot-loaded (`POST /v1/load_lora_adapter`) under a name never used before (a
reused name can meet stale prefix-cache KV, vllm#42125); changing or deleting the adapter
unloads that name. A batch's calls, and those joining it, go as concurrent completions
requests (prompts as token ids, each with its adapter's name and its own sampling params, the
torch engine's stops); vLLM batches them itself. The server reports the model's own logprobs
(`raw_logprobs`) as the torch engine does; tokens match it greedily (a seeded sample draws
from vLLM's generator, not torch's).
"""

from __future__ import annotations

import asyncio
import atexit
import itertools
import logging
import shutil
import tempfile
from collections.abc import Callable, Sequence
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from pathlib import Path
from typing import Any

import httpx
import numpy as np

from engines.install import find_vllm
from engines.process import Child
from engines.served_models import model_directory
from engines.vllm_client import prompt_logprobs_of
from engines.vllm_server import ServerSpec, local_url, server_argv, server_env, wait_ready
from trainer_bridge.lab.engine import SampleCall, Sampled, TorchLabEngine

log = logging.getLogger(__name__)

MAX_LORAS = 8
"""Adapters one vLLM step may mix (its `--max-loras`); calls of more wait for a slot."""
MAX_CPU_LORAS = 64
"""Adapters the server keeps loaded (`--max-cpu-loras`); beyond them it reloads from disk."""
JOIN_POLL_S = 0.05
"""How often, while requests are in flight, the batch asks for calls that join it."""


class VLLMLabEngine:
    """A `hub_server.lab.engine.LabEngine`: training by `trainer`, sampling by the vLLM
    server at `url` (`served_name`: its base model), started as `server`. Adapters above
    `max_lora_rank` (the server's `--max-lora-rank`) are refused."""

    def __init__(
        self,
        trainer: TorchLabEngine,
        server: Child,
        url: str,
        served_name: str,
        max_lora_rank: int,
    ) -> None:
        self.trainer = trainer
        self.base_model = trainer.base_model
        self.max_context = trainer.max_context
        self.server = server
        self.url = url
        self.served_name = served_name
        self.max_lora_rank = max_lora_rank
        self.http = httpx.Client(base_url=url, timeout=httpx.Timeout(None, connect=10))
        self.pool = ThreadPoolExecutor(max_workers=64, thread_name_prefix="lab-vllm")
        self.exports = Path(tempfile.mkdtemp(prefix="prime-lab-vllm-"))
        self._served: dict[str, str] = {}  # adapter -> the name the server has it under
        self._versions = itertools.count(1)
        self._ready = False

    # ------------------------------------------------------------------ the server

    def wait_ready(self) -> None:
        """Wait until the server answers (its start takes minutes; training goes on meanwhile);
        a server that died raises `ChildDied` with its log's tail."""
        self.server.check()
        if not self._ready:
            asyncio.run(wait_ready(self.url, check=self.server.check))
            self._ready = True

    def close(self) -> None:
        """Stop the server and drop the exported adapters (atexit does it for the hub)."""
        self.pool.shutdown(wait=False, cancel_futures=True)
        self.http.close()
        self.server.stop()
        shutil.rmtree(self.exports, ignore_errors=True)

    def _post(self, path: str, body: dict[str, Any]) -> httpx.Response:
        """POST to the server: a 400 is the caller's mistake (a ValueError with vLLM's
        message), anything else but a 200 the Lab's."""
        response = self.http.post(path, json=body)
        if response.status_code == 400:
            raise ValueError(f"vLLM refused the request: {_message(response)}")
        if response.status_code != 200:
            raise RuntimeError(
                f"vLLM answered {path} with {response.status_code}: {_message(response)}"
            )
        return response

    # ------------------------------------------------------------------ adapters

    def _model(self, adapter: str | None) -> str:
        """The model name requests for `adapter` ask for, exported and loaded if need be."""
        if adapter is None:
            return self.served_name
        served = self._served.get(adapter)
        if served is None:
            served = f"{adapter}-v{next(self._versions)}"
            rank = self.trainer.export(adapter, self.exports / served)
            if rank > self.max_lora_rank:
                shutil.rmtree(self.exports / served, ignore_errors=True)
                raise ValueError(_too_large(rank, self.max_lora_rank))
            body = {"lora_name": served, "lora_path": str(self.exports / served)}
            try:
                self._post("/load_lora_adapter", body)
            except ValueError as refused:  # our own export: not the caller's mistake
                raise RuntimeError(str(refused)) from None
            self._served[adapter] = served
        return served

    def _retire(self, adapter: str) -> None:
        """Unload `adapter`'s served copy (it changed or is gone); the next sample exports it
        again under a new name. A refused unload is logged, not raised: it costs the server
        memory, not the caller's step."""
        served = self._served.pop(adapter, None)
        if served is None:
            return
        try:
            self._post("/unload_lora_adapter", {"lora_name": served})
        except (ValueError, RuntimeError, httpx.HTTPError) as error:
            log.warning("vLLM kept the Lab adapter %s: %s", served, error)
        shutil.rmtree(self.exports / served, ignore_errors=True)

    def create_adapter(
        self, name: str, rank: int, seed: int | None, train_mlp: bool, train_attn: bool
    ) -> None:
        if rank > self.max_lora_rank:
            raise ValueError(_too_large(rank, self.max_lora_rank))
        self.trainer.create_adapter(name, rank, seed, train_mlp, train_attn)

    def delete_adapter(self, name: str) -> None:
        self.trainer.delete_adapter(name)
        self._retire(name)

    def copy_adapter(self, source: str, target: str) -> None:
        self.trainer.copy_adapter(source, target)
        self._retire(target)

    def load(self, name: str, archive: bytes, optimizer: bool) -> None:
        self.trainer.load(name, archive, optimizer)
        self._retire(name)

    def save(self, name: str, optimizer: bool) -> bytes:
        return self.trainer.save(name, optimizer)

    # ------------------------------------------------------------------ training

    def forward_backward(
        self,
        name: str,
        tokens: list[np.ndarray],
        inputs: list[dict[str, np.ndarray]],
        loss_fn: str,
        config: dict[str, float],
        forward_only: bool,
    ) -> tuple[list[dict[str, np.ndarray]], dict[str, float]]:
        return self.trainer.forward_backward(name, tokens, inputs, loss_fn, config, forward_only)

    def optim_step(self, name: str, adam: dict[str, float]) -> dict[str, float]:
        metrics = self.trainer.optim_step(name, adam)
        self._retire(name)
        return metrics

    # ------------------------------------------------------------------ sampling

    def sample_batch(
        self,
        calls: Sequence[SampleCall],
        more: Callable[[int], Sequence[SampleCall]],
        done: Callable[[int, list[Sampled] | ValueError], None],
    ) -> None:
        """Send `calls` at once, and those `more` gives while any is in flight; `done` hears
        of each as its request ends. A failure of the server's fails the calls it hit (the
        batch raises it once the others have ended), and no more join."""
        self.wait_ready()
        pending: dict[Future[list[Sampled]], tuple[int, int]] = {}  # request -> (call, rows)
        numbered = 0
        failure: Exception | None = None

        def send(new: Sequence[SampleCall]) -> None:
            nonlocal numbered
            for call in new:
                index, numbered = numbered, numbered + 1
                try:
                    body = self._body(call)
                except ValueError as error:
                    done(index, error)
                    continue
                request = self.pool.submit(self._complete, body, call.num_samples)
                pending[request] = (index, call.num_samples)

        send(calls)
        while pending:
            ended, _ = wait(pending, timeout=JOIN_POLL_S, return_when=FIRST_COMPLETED)
            for request in ended:
                index, _ = pending.pop(request)
                try:
                    done(index, request.result())
                except ValueError as error:
                    done(index, error)
                except Exception as error:  # noqa: BLE001 - raised once the others end
                    failure = failure or error
            if pending and failure is None:
                send(more(sum(rows for _, rows in pending.values())))
        if failure is not None:
            raise failure

    def _body(self, call: SampleCall) -> dict[str, Any]:
        """The completions request of `call` (checked as the torch engine checks it)."""
        max_tokens = self.trainer.check_call(call)
        params = call.params
        top_k = int(params.get("top_k") or -1)
        temperature = float(params.get("temperature") or 0.0)
        body: dict[str, Any] = {
            "model": self._model(call.adapter),
            "prompt": list(call.prompt),
            "n": call.num_samples if temperature > 0 else 1,  # vLLM: greedy is n = 1
            "max_tokens": max_tokens,
            "temperature": temperature,
            "top_k": top_k if top_k > 0 else -1,
            "top_p": float(params.get("top_p") or 1.0),
            "stop_token_ids": self.trainer.stop_tokens(call),
            "stop": list(call.stop_strings),
            "ignore_eos": True,  # the stops above are all a row's (the torch engine's rule)
            "skip_special_tokens": False,  # stop strings are matched in the text as decoded
            "logprobs": 0,
            "return_token_ids": True,
        }
        if params.get("seed") is not None:
            body["seed"] = int(params["seed"] or 0)
        return body

    def _complete(self, body: dict[str, Any], samples: int) -> list[Sampled]:
        """One completions request (a pool thread); its `samples` sequences in order (a
        greedy request's one sequence, `samples` times: vLLM refuses n > 1 when greedy)."""
        response = self._post("/completions", body)
        sequences = []
        try:  # past the status check, a malformed answer is the Lab's failure, not a ValueError
            for choice in sorted(response.json()["choices"], key=lambda c: int(c["index"])):
                tokens = [int(t) for t in choice["token_ids"]]
                logprobs = [float(x) for x in choice["logprobs"]["token_logprobs"]]
                reason = "length" if choice.get("finish_reason") == "length" else "stop"
                sequences.append((tokens, logprobs, reason))
        except (KeyError, TypeError, ValueError) as error:
            raise RuntimeError(
                f"vLLM's answer lacks token ids or logprobs ({error!r}): {response.text[:300]}"
            ) from None
        return sequences * (samples // len(sequences))

    def prompt_logprobs(self, name: str | None, prompt: list[int]) -> list[float]:
        """log p(prompt[i] | prompt[:i]) for i >= 1 under adapter `name`, by the server."""
        self.trainer.check_scored(name, prompt)
        self.wait_ready()
        body = {
            "model": self._model(name),
            "prompt": prompt,
            "max_tokens": 1,
            "temperature": 1.0,
            "prompt_logprobs": 0,
        }
        return prompt_logprobs_of(self._post("/completions", body).json(), prompt)


def _too_large(rank: int, largest: int) -> str:
    return (
        f"LoRA rank {rank} is above this Lab's largest, {largest} (its vLLM sampler's "
        "--max-lora-rank: `prime hub serve --lab-max-lora-rank`)."
    )


def _message(response: httpx.Response) -> str:
    """vLLM's error message (`{"error": {"message": …}}`), else the body's start."""
    try:
        return str(response.json()["error"]["message"])
    except (ValueError, KeyError, TypeError):
        return response.text[:300]


def start_vllm_lab(
    base_model: str,
    *,
    max_lora_rank: int,
    log: Path,
    device: str = "auto",
    say: Callable[[str], None] = lambda _line: None,
) -> VLLMLabEngine:
    """Start the vLLM server (from the thread that lives as long as the Lab: it dies with
    that thread), load the torch engine meanwhile, and give the engine; the server's start
    goes on in the background (`wait_ready`). `EngineError` when vLLM is not installed."""
    engine = find_vllm()
    spec = ServerSpec(
        model=model_directory(base_model),
        served_name=base_model,
        url=local_url(),
        lora_rank=max_lora_rank,
        max_loras=MAX_LORAS,
        max_cpu_loras=MAX_CPU_LORAS,
        logprobs_mode="raw_logprobs",
    )
    server = Child("vllm", server_argv(engine, spec), log, env=server_env())
    server.start()
    say(f"starting vLLM {engine.version} for the Lab's sampling (1-3 min; log: {log})")
    try:
        trainer = TorchLabEngine(base_model, device=device)
    except BaseException:
        server.stop(0)
        raise
    lab = VLLMLabEngine(trainer, server, spec.url, base_model, max_lora_rank)
    atexit.register(lab.close)
    return lab
