"""A fake `vllm serve --enable-lora` on loopback: vLLM's wire format for the routes prime train
uses (completions of token-id prompts with token ids and logprobs, completions with
prompt_logprobs, runtime LoRA load and unload), and a log of what was asked, so tests can check
the control plane on CPU.

"Serving a policy" here means answering the probe with the logprobs stored in the loaded
adapter's policy.json (what the real server computes from the adapter's weights); `ignore_loads`
makes it answer 200 to loads and keep serving the old policy, `refuse` names adapters it rejects
(`policy-N`, whatever run id prefixes it).
"""

from __future__ import annotations

import asyncio
import json
import random
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from aiohttp import web

from tests.support import free_port


@dataclass
class FakeVLLM:
    base_model: str
    delay_s: float = 0.05
    ignore_loads: bool = False
    refuse: set[str] = field(default_factory=set)
    port: int = field(default_factory=free_port)
    adapters: dict[str, Path] = field(default_factory=dict)
    inflight: dict[str, int] = field(default_factory=dict)
    log: list[dict[str, Any]] = field(default_factory=list)
    violations: list[str] = field(default_factory=list)
    base_probe: Path | None = None
    """The run's broadcasts/step_0: the base weights' probe (the trainer's step-0 broadcast)."""
    _loop: asyncio.AbstractEventLoop | None = None
    _runner: web.AppRunner | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    def start(self) -> FakeVLLM:
        ready = threading.Event()

        def serve() -> None:
            self._loop = asyncio.new_event_loop()
            app = web.Application()
            app.router.add_get("/v1/models", self._models)
            app.router.add_post("/v1/completions", self._completions)
            app.router.add_post("/v1/load_lora_adapter", self._load)
            app.router.add_post("/v1/unload_lora_adapter", self._unload)
            self._runner = web.AppRunner(app)
            self._loop.run_until_complete(self._runner.setup())
            site = web.TCPSite(self._runner, "127.0.0.1", self.port)
            self._loop.run_until_complete(site.start())
            ready.set()
            self._loop.run_forever()

        threading.Thread(target=serve, daemon=True).start()
        ready.wait(10)
        return self

    def stop(self) -> None:
        if self._loop is not None and self._runner is not None:
            asyncio.run_coroutine_threadsafe(self._runner.cleanup(), self._loop).result(10)
            self._loop.call_soon_threadsafe(self._loop.stop)

    async def _models(self, request: web.Request) -> web.Response:
        data = [{"id": self.base_model}] + [{"id": name} for name in self.adapters]
        return web.json_response({"object": "list", "data": data})

    async def _load(self, request: web.Request) -> web.Response:
        body = await request.json()
        name, path = body["lora_name"], Path(body["lora_path"])
        self.log.append({"route": "load", "name": name, "t": time.monotonic()})
        if any(name == r or name.endswith(f"-{r}") for r in self.refuse):
            return web.Response(status=400, text=f"refused to load {name}")
        if name in self.adapters:
            return web.Response(
                status=400, text=f"The lora adapter '{name}' has already been loaded"
            )
        if not (path / "adapter_config.json").is_file():
            return web.Response(status=400, text=f"no adapter at {path}")
        self.adapters[name] = path
        return web.Response(text=f"Success: LoRA adapter '{name}' added successfully.")

    async def _unload(self, request: web.Request) -> web.Response:
        name = (await request.json())["lora_name"]
        self.log.append({"route": "unload", "name": name, "t": time.monotonic()})
        if self.inflight.get(name):
            self.violations.append(f"unloaded {name} with {self.inflight[name]} requests in flight")
        if name not in self.adapters:
            return web.Response(status=404, text=f"no adapter {name}")
        del self.adapters[name]
        return web.Response(text="ok")

    def _known(self, model: str) -> bool:
        return model == self.base_model or model in self.adapters

    async def _sample(self, body: dict[str, Any]) -> web.Response:
        """A completion of the token-id prompt: random ids and logprobs, vLLM's fields."""
        model = body["model"]
        self.log.append(
            {"route": "chat", "model": model, "user": body.get("user"), "t": time.monotonic()}
        )
        if not self._known(model):
            return web.json_response(
                {"error": {"message": f"The model `{model}` does not exist."}}, status=404
            )
        seed = json.dumps(body["prompt"]) + str(len(self.log))  # distinct per request
        self.inflight[model] = self.inflight.get(model, 0) + 1
        try:
            await asyncio.sleep(self.delay_s)
        finally:
            self.inflight[model] -= 1
        rng = random.Random(seed)
        n = rng.randint(2, min(6, int(body.get("max_tokens") or 6)))
        ids = [rng.randint(300, 40000) for _ in range(n)]
        logprobs = [-rng.uniform(0.1, 5.0) for _ in ids]
        return web.json_response(
            {
                "id": "cmpl-fake",
                "object": "text_completion",
                "model": model,
                "choices": [
                    {
                        "index": 0,
                        "text": "".join(rng.choice("aeioxyz") for _ in ids),
                        "finish_reason": "length",
                        "token_ids": ids,
                        "prompt_token_ids": body["prompt"],
                        "logprobs": {
                            "tokens": [f"token_id:{t}" for t in ids],
                            "token_logprobs": logprobs,
                            "text_offset": list(range(len(ids))),
                            "top_logprobs": None,
                        },
                    }
                ],
                "usage": {
                    "prompt_tokens": len(body["prompt"]),
                    "completion_tokens": n,
                    "total_tokens": len(body["prompt"]) + n,
                },
            }
        )

    async def _completions(self, request: web.Request) -> web.Response:
        body = await request.json()
        if body.get("prompt_logprobs") is None:
            return await self._sample(body)
        model, ids = body["model"], body["prompt"]
        self.log.append({"route": "probe", "model": model})
        if not self._known(model):
            return web.json_response({"error": {"message": f"no model {model}"}}, status=404)
        # the adapter's own probe, or the base model's (also when the load was ignored)
        source = self.base_probe if model == self.base_model or self.ignore_loads else None
        if source is None:
            source = self.adapters[model]
        if source is not None and (source / "policy.json").is_file():
            logprobs = json.loads((source / "policy.json").read_text())["probe"]["logprobs"]
        else:
            logprobs = [-1.0] * (len(ids) - 1)
        entries: list[Any] = [None] + [
            {str(t): {"logprob": lp, "rank": 1, "decoded_token": "x"}}
            for t, lp in zip(ids[1:], logprobs)
        ]
        return web.json_response(
            {
                "choices": [
                    {"index": 0, "text": "x", "prompt_logprobs": entries, "finish_reason": "length"}
                ]
            }
        )
