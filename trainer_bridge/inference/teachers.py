"""Teachers: frozen models whose traces (`sft`, `rft`) or logprobs (`opd`) the student learns.

A teacher (`[orchestrator.algo.teacher] model`) is what `prime eval run -m` takes, or a policy
directory, or the environment's reference policy:
- `reference`: the environment's reference solver (traces only: it has no distribution);
- `local/<name>` or a directory (`prime train export`'s PEFT adapter, on the student's base, or
  a merged Hugging Face model): a torch model in this process, sampling and scoring;
- any name with `base_url`: an OpenAI-compatible server; its logprobs of given tokens come from
  `/v1/completions` with `echo` + `logprobs` and the prompt as token ids (what vLLM serves);
- `provider/model` (hosted APIs): traces only, their logprobs are of what they sample.
A teacher that cannot score the student's tokens is refused for `opd` before any model loads.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import Protocol

import httpx

from prime_env.clients.base import ModelClient
from prime_env.clients.model_specs import REFERENCE_MODEL, resolve_model
from prime_env.environment import Environment
from prime_env.errors import ModelConfigError
from prime_env.reference import ReferenceClient
from trainer_bridge.config import ConfigError, ModelConfig, TeacherConfig

LOCAL_PREFIX = "local/"
SCORE_TIMEOUT_S = 300.0


class TeacherError(RuntimeError):
    """A teacher that does not answer as it must (e.g. no prompt logprobs): stops the run."""


class TeacherScorer(Protocol):
    """A frozen teacher's logprobs of given tokens (`opd`); the trainer's own policy
    logprobs are trainer/modeling.py's TokenScorer."""

    async def logprobs(self, token_ids: list[int]) -> list[float]:
        """log p(token_ids[i] | token_ids[:i]) for i ≥ 1, under the teacher (temperature 1)."""
        ...

    async def close(self) -> None: ...


class InProcessTeacher(TeacherScorer, Protocol):
    """A teacher run in this process (inference/local_teacher.py): a client and a scorer."""

    @property
    def client(self) -> ModelClient: ...


LocalTeacherFactory = Callable[[TeacherConfig, ModelConfig], InProcessTeacher]


def teacher_kind(cfg: TeacherConfig) -> str:
    """`reference`, `local` (torch in this process), `server` (OpenAI-compatible) or `hosted`."""
    if cfg.model == REFERENCE_MODEL:
        return "reference"
    if cfg.base_url:
        return "server"
    if cfg.model.startswith(LOCAL_PREFIX) or Path(cfg.model).is_dir():
        return "local"
    return "hosted"


def check_teacher(cfg: TeacherConfig, *, logprobs: bool) -> None:
    """Refuse, before anything loads, a teacher that cannot be used (`logprobs`: one that
    must score the student's tokens)."""
    kind = teacher_kind(cfg)
    if kind == "local" and not cfg.model.startswith(LOCAL_PREFIX):
        path = Path(cfg.model)
        if not ((path / "adapter_config.json").is_file() or (path / "config.json").is_file()):
            raise ConfigError(
                f"teacher {cfg.model}: the directory holds neither a PEFT adapter "
                "(adapter_config.json) nor a Hugging Face model (config.json); give "
                "`prime train export RUN -o DIR`'s output"
            )
    if kind == "hosted" or cfg.model.startswith(LOCAL_PREFIX):
        try:
            resolve_model(cfg.model, api_key_var=cfg.api_key_var)
        except ModelConfigError as exc:
            raise ConfigError(f"teacher {cfg.model!r}: {exc}") from None
    if not logprobs:
        return
    if kind == "reference":
        raise ConfigError(
            "teacher 'reference' plays the environment's reference solver, which has no "
            "distribution over tokens: opd needs a teacher that scores the student's tokens "
            "(local/<name>, a policy directory, or base_url of a vLLM server); use the "
            "reference with algo.type = 'sft' or 'rft'"
        )
    if kind == "hosted":
        raise ConfigError(
            f"teacher {cfg.model!r} is a hosted chat API: it returns logprobs only of the "
            "tokens it samples, not of the student's, which opd needs. Serve the model with "
            "vLLM and set algo.teacher.base_url (its /v1/completions echoes prompt logprobs), "
            "or give local/<name> or a policy directory; hosted teachers fit sft and rft"
        )


class CompletionsScorer:
    """Prompt logprobs from an OpenAI-compatible `/v1/completions`: the token ids as the prompt,
    `echo` + `logprobs`, one token generated (and ignored). With vLLM's
    `return_tokens_as_token_ids` the tokens come back as `token_id:N`, so a server that scored
    other tokens than those sent is caught."""

    def __init__(self, cfg: TeacherConfig) -> None:
        assert cfg.base_url
        key = os.environ.get(cfg.api_key_var) if cfg.api_key_var else None
        headers = {"authorization": f"Bearer {key}"} if key else {}
        self.cfg = cfg
        self.http = httpx.AsyncClient(
            base_url=cfg.base_url.rstrip("/"), headers=headers, timeout=SCORE_TIMEOUT_S
        )

    async def logprobs(self, token_ids: list[int]) -> list[float]:
        body = {
            "model": self.cfg.model,
            "prompt": token_ids,
            "echo": True,
            "logprobs": 1,
            "max_tokens": 1,
            "temperature": 0.0,
            "return_tokens_as_token_ids": True,
        }
        where = f"teacher {self.cfg.model} at {self.cfg.base_url}/completions"
        try:
            response = await self.http.post("/completions", json=body)
        except httpx.HTTPError as exc:
            raise TeacherError(f"{where} did not answer: {exc}") from exc
        if response.status_code != 200:
            raise TeacherError(
                f"{where} answered {response.status_code}: {response.text[:300]} (opd needs "
                "/v1/completions with echo and logprobs, as vLLM serves)"
            )
        try:
            choice = response.json()["choices"][0]
            scored = choice["logprobs"]["token_logprobs"]
            tokens = choice["logprobs"].get("tokens") or []
        except (ValueError, KeyError, IndexError, TypeError) as exc:
            raise TeacherError(f"{where} sent no prompt logprobs ({exc!r})") from exc
        if len(scored) < len(token_ids):
            raise TeacherError(
                f"{where} echoed {len(scored)} logprobs for a {len(token_ids)}-token prompt: "
                "it does not echo prompt logprobs"
            )
        for i, token in enumerate(tokens[: len(token_ids)]):
            if str(token).startswith("token_id:") and token != f"token_id:{token_ids[i]}":
                raise TeacherError(
                    f"{where} scored token {token} at position {i}, not token_id:{token_ids[i]}: "
                    "the teacher must share the student's tokenizer"
                )
        return [float(x) for x in scored[1 : len(token_ids)]]

    async def close(self) -> None:
        await self.http.aclose()


class Teachers:
    """The run's teachers, each made once, when first used; `close` releases them."""

    def __init__(self, student: ModelConfig, local: LocalTeacherFactory | None = None) -> None:
        self.student = student
        self._make_local = local
        self._local: dict[str, InProcessTeacher] = {}
        self._scorers: dict[str, TeacherScorer] = {}
        self._clients: dict[str, ModelClient] = {}

    def _local_teacher(self, cfg: TeacherConfig) -> InProcessTeacher:
        if cfg.model not in self._local:
            if self._make_local is None:
                raise TeacherError(f"teacher {cfg.model}: no in-process model loader was given")
            self._local[cfg.model] = self._make_local(cfg, self.student)
        return self._local[cfg.model]

    def client(self, cfg: TeacherConfig, env: Environment) -> ModelClient:
        """The client that samples the teacher's traces of `env`'s tasks."""
        kind = teacher_kind(cfg)
        if kind == "reference":
            return ReferenceClient(env)
        if kind == "local":
            return self._local_teacher(cfg).client
        key = f"{cfg.model}@{cfg.base_url}"
        if key not in self._clients:
            spec = resolve_model(cfg.model, base_url=cfg.base_url, api_key_var=cfg.api_key_var)
            self._clients[key] = spec.create_client()
        return self._clients[key]

    def scorer(self, cfg: TeacherConfig) -> TeacherScorer:
        """What scores the student's tokens (check_teacher(logprobs=True) has passed)."""
        check_teacher(cfg, logprobs=True)
        if teacher_kind(cfg) == "local":
            return self._local_teacher(cfg)
        key = f"{cfg.model}@{cfg.base_url}"
        if key not in self._scorers:
            self._scorers[key] = CompletionsScorer(cfg)
        return self._scorers[key]

    async def close(self) -> None:
        for teacher in self._local.values():
            await teacher.close()
        for scorer in self._scorers.values():
            await scorer.close()
        for client in self._clients.values():
            await client.aclose()
