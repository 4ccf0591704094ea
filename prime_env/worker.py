"""The environment worker: one environment served over the worker protocol (remote/wire.py).

It runs in the environment's own virtualenv, started by path (`python -I worker.py ...`), so it
needs nothing but the standard library and the framework of the environment it serves, which an
adapter imports:

- `verifiers`: a verifiers 0.4 package (a `Taskset`, maybe an `Env` and a `Harness`), loaded
  with verifiers' own `load_environment(EnvConfig)`; every rollout is one verifiers episode run
  by verifiers itself (its harness, runtime and interception), its model calls sent to the
  runner's interception server;
- `openenv`: an OpenEnv package (openenv-core 0.3): its server (started here, or a `url`)
  driven with openenv-core's own client, one session per rollout;
- `prime_env`: an environment of this SDK whose other dependencies clash with the runner's.

The worker prints `READY <address>` on stdout once it listens (or `FAILED <json>` and exits 1),
and exits when its stdin closes (the runner is gone), killing its process group with it.
"""

from __future__ import annotations

import argparse
import asyncio
import importlib.util
import json
import os
import signal
import sys
import threading
import traceback
from pathlib import Path
from types import ModuleType
from typing import Any

REMOTE = Path(__file__).resolve().parent / "remote"


def _remote(name: str) -> ModuleType:
    """A module of `remote/` (the runner's side), imported by path without putting a directory
    on sys.path (its neighbours must not shadow the environment's own imports)."""
    full = f"prime_remote_{name}"
    if full in sys.modules:
        return sys.modules[full]
    spec = importlib.util.spec_from_file_location(full, REMOTE / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[full] = module
    spec.loader.exec_module(module)
    return module


wire = _remote("wire")


class WorkerError(Exception):
    """A request the worker cannot serve; answered as `{"error": {type, message}}`."""

    def __init__(self, error_type: str, message: str) -> None:
        super().__init__(message)
        self.error_type = error_type
        self.message = message


class Adapter:
    """What the worker needs of an environment framework."""

    kind = ""

    async def start(self) -> None:
        """Bring up what the rollouts share (verifiers' serving resources, an OpenEnv server)."""

    async def close(self) -> None:
        """Tear down what `start` brought up."""

    def hello(self) -> dict[str, Any]:
        """`{"name", "version", "rubric": {"rewards": {name: weight}, "metrics": [...],
        "group": bool}}`."""
        raise NotImplementedError

    def tasks(self, split: str) -> list[dict[str, Any]]:
        """The split's tasks as `{"id", "prompt", "answer", "info"}`."""
        raise NotImplementedError

    async def rollout(
        self, key: str, task_id: str, model: dict[str, Any], sampling: dict[str, Any]
    ) -> dict[str, Any]:
        """Run one rollout; `{"scores": {"rewards", "metrics", "weights"}, "stop_reason",
        "info", "error"}`. A failed rollout answers with `error` set, never with zeros."""
        raise NotImplementedError

    async def score_group(self, keys: list[str]) -> list[dict[str, Any]]:
        raise WorkerError("unsupported", f"a {self.kind} environment has no group rewards")

    def forget(self, keys: list[str]) -> None:
        """Drop what was kept of these rollouts for group scoring."""


# ------------------------------------------------------------------------------- verifiers


def _plain(value: Any) -> Any:
    """A pydantic value (or anything else) as JSON-able data."""
    dump = getattr(value, "model_dump", None)
    if dump is not None:
        return dump(mode="json", exclude_none=True)
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    if value is None or isinstance(value, (str, int, float, bool)):
        return value
    return str(value)


_TASK_DATA_FIELDS = {
    "idx", "id", "name", "description", "prompt", "system_prompt", "image", "workdir",
    "agent_user", "skills", "network_allow", "network_block", "artifacts", "artifact_max_bytes",
    "timeout", "resources", "answer",
}  # fmt: skip
"""verifiers' own TaskData fields: what a subclass adds beyond them is the task's `info`."""


class VerifiersAdapter(Adapter):
    """A verifiers 0.4 (`verifiers.v1`) taskset, its env and harness, run by verifiers itself.

    `env_args` are the taskset's config fields (`--env.taskset.<field>` in verifiers' CLI), plus
    `harness` (a harness id or config, for every seat; default: the taskset's own, else `null`,
    a chat loop: verifiers' `bash` would run the model's commands on this machine, so it runs
    only when asked for), `runtime` (a runtime type or config; default `subprocess`: Prime's
    hosted sandbox, verifiers' default, cannot be reached from here), `env` (an `Env` id to pair
    with the taskset) and `max_tasks` (how many tasks of an infinite taskset to take, 1000).
    """

    kind = "verifiers"

    def __init__(self, module: str, env_args: dict[str, Any]) -> None:
        import verifiers.v1 as vf

        self.vf = vf
        args = dict(env_args)
        harness = args.pop("harness", None)
        runtime = args.pop("runtime", "subprocess")
        pair = args.pop("env", "")
        self.max_tasks = int(args.pop("max_tasks", 1000))
        self.taskset_id = module  # the package's module: verifiers' taskset id
        raw: dict[str, Any] = {"taskset": {"id": self.taskset_id, **args}}
        if pair:
            raw["id"] = pair
        config_type = vf.env_config_type(self.taskset_id, pair)
        seat: dict[str, Any] = {
            "runtime": {"type": runtime} if isinstance(runtime, str) else runtime
        }
        if harness is None and vf.default_harness_id(self.taskset_id) == "bash":
            harness = "null"  # bash on this machine only when asked for: `harness: "bash"`
        if harness is not None:
            seat["harness"] = {"id": harness} if isinstance(harness, str) else harness
        for name, field in config_type.model_fields.items():
            if isinstance(field.default, vf.AgentConfig):
                raw[name] = seat
        self.env = vf.load_environment(vf.resolve_env_config(raw))
        taskset = self.env.taskset
        items = taskset.head(self.max_tasks) if getattr(taskset, "INFINITE", False) else taskset
        self._tasks = {str(task.key): task for task in items}
        self._serving: Any = None
        self._keys = 0

    async def start(self) -> None:
        self._serving = self.env.serving()
        await self._serving.__aenter__()

    async def close(self) -> None:
        if self._serving is not None:
            await self._serving.__aexit__(None, None, None)
            self._serving = None

    def hello(self) -> dict[str, Any]:
        import verifiers

        rewards: dict[str, float] = {}
        metrics: list[str] = []
        task_type = type(self.env.taskset).task_type()
        for name in dir(task_type):
            fn = getattr(task_type, name, None)
            if getattr(fn, "reward", False) is True:
                weight = float(getattr(fn, "_vf_weight", 1.0))
                if weight:
                    rewards[name] = weight
                else:
                    metrics.append(name)
            elif getattr(fn, "metric", False) is True:
                metrics.append(name)
        return {
            "name": self.taskset_id,
            "version": None,
            "framework": f"verifiers {verifiers.__version__}",
            "rubric": {"rewards": rewards, "metrics": metrics, "group": False},
        }

    def tasks(self, split: str) -> list[dict[str, Any]]:
        return [self._task(key, task) for key, task in self._tasks.items()]

    def _task(self, key: str, task: Any) -> dict[str, Any]:
        data = task.data
        prompt = data.prompt
        messages: list[dict[str, Any]] = []
        if data.system_prompt:
            messages.append({"role": "system", "content": data.system_prompt})
        if isinstance(prompt, str):
            messages.append({"role": "user", "content": prompt})
        elif prompt is not None:
            messages.extend(_plain(m) for m in prompt)
        fields = data.model_dump(mode="json")
        info = {k: v for k, v in fields.items() if k not in _TASK_DATA_FIELDS and v is not None}
        info["verifiers_task"] = {"type": type(task).__name__, "idx": data.idx}
        return {"id": key, "prompt": messages, "answer": fields.get("answer"), "info": info}

    async def rollout(
        self, key: str, task_id: str, model: dict[str, Any], sampling: dict[str, Any]
    ) -> dict[str, Any]:
        vf = self.vf
        task = self._tasks.get(task_id)
        if task is None:
            raise WorkerError("unknown_task", f"no task {task_id!r} in this worker")
        self._keys += 1
        variable = f"PRIME_ROLLOUT_KEY_{os.getpid()}_{self._keys}"
        os.environ[variable] = str(model["api_key"])
        try:
            ctx = vf.ModelContext(
                model=str(model["model"]),
                client=vf.EvalClientConfig(base_url=str(model["base_url"]), api_key_var=variable),
            )
            [slot] = self.env.slots(task, 1)
            episode = await self.env.run_slot(slot, ctx)
        finally:
            os.environ.pop(variable, None)
        return self._result(episode)

    def _result(self, episode: Any) -> dict[str, Any]:
        traces = [t for t in episode.traces if t.agent.trainable] or list(episode.traces)
        info = {
            "verifiers": {
                "episode_id": episode.id,
                "traces": [t.id for t in episode.traces],
                "stop_condition": [t.stop_condition for t in traces],
                "is_timeout": episode.is_timeout,
            }
        }
        if not episode.ok:
            errors = list(episode.errors) + [e for t in episode.traces for e in t.errors]
            first = errors[0] if errors else None
            return {
                "error": {
                    "type": f"verifiers.{first.type}" if first else "verifiers.episode_failed",
                    "message": first.message if first else "the episode did not complete",
                },
                "info": info,
            }
        rewards: dict[str, float] = {}
        weights: dict[str, float] = {}
        metrics: dict[str, float] = {}
        prefix = len(traces) > 1
        for trace in traces:
            tag = f"{trace.agent.name}/" if prefix else ""
            for name, reward in trace.rewards.items():
                if reward.weight:
                    rewards[tag + name] = float(reward.score)
                    weights[tag + name] = float(reward.weight)
                else:
                    metrics[tag + name] = float(reward.score)
            for name, value in trace.metrics.items():
                if isinstance(value, (int, float)) and not isinstance(value, bool):
                    metrics[tag + name] = float(value)
        stop = traces[-1].stop_condition if traces else None
        return {
            "scores": {"rewards": rewards, "metrics": metrics, "weights": weights},
            "stop_reason": stop,
            "info": info,
        }


# ------------------------------------------------------------------------------- openenv

OPENENV_SERVER_DIED = "openenv_server_died"
"""A rollout's error type when the OpenEnv server went away (or never answered)."""
_CAPACITY = "CAPACITY_REACHED"
_RENDER_SKIP = {"reward", "done", "metadata"}


def _free_port() -> int:
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _get_json(url: str, timeout: float = 5.0) -> Any:
    import urllib.request

    with urllib.request.urlopen(url, timeout=timeout) as response:
        return json.loads(response.read())


class OpenEnvAdapter(Adapter):
    """An OpenEnv environment (openenv-core 0.3): a server speaking reset/step, driven with
    openenv-core's own `GenericEnvClient`, one WebSocket session per rollout.

    The server: `url` (env arg) when it runs already, else the package's own app
    (`openenv.yaml`'s `app`, e.g. `server.app:app` inside the package, or the env arg `app`)
    started here with uvicorn on a free loopback port, in this worker's process group (it goes
    with the worker). The model's tools: the server's MCP tools when its actions are MCP calls
    (`list_tools` / `call_tool`); else its reply text is the action when the action has one
    string field; else one tool, `act`, whose parameters are the action's schema. An episode is
    `reset(seed)` then one step per action until the server says `done` or `max_turns`
    replies; the reward is the sum of the steps' rewards (`reward: "last"`: the last one's).
    A server that dies, or never answers, is an error of the rollout, never a 0.

    env args: `url`, `app`, `num_tasks` (seeds 0..n-1, 100), `max_turns` (4), `reward`
    ("sum" | "last"), `system_prompt`, `reset` (more reset arguments)."""

    kind = "openenv"

    def __init__(self, env_id: str, env_args: dict[str, Any]) -> None:
        # The worker uses openenv-core's client only: its web UI, gradio (imported by
        # openenv.core, which skips it when missing), stays out (~5 s of CPU per start).
        # The server, a process of its own, is run as it is.
        sys.modules.setdefault("gradio", None)  # type: ignore[arg-type]
        from openenv.core.generic_client import GenericEnvClient

        self.client_type = GenericEnvClient
        args = dict(env_args)
        self.module = env_id
        self.url = str(args.pop("url", "") or "").rstrip("/")
        self.app = str(args.pop("app", "") or "")
        self.num_tasks = int(args.pop("num_tasks", 100))
        self.max_turns = int(args.pop("max_turns", 4))
        self.reward_mode = str(args.pop("reward", "sum"))
        self.system_prompt = args.pop("system_prompt", None)
        self.reset_args = dict(args.pop("reset", None) or {})
        if args:
            raise WorkerError(
                "unknown_env_args",
                f"unknown env args {sorted(args)} for an OpenEnv environment; it takes url, "
                "app, num_tasks, max_turns, reward, system_prompt, reset",
            )
        if self.reward_mode not in ("sum", "last") or self.max_turns < 1 or self.num_tasks < 1:
            raise WorkerError(
                "bad_env_args", 'reward is "sum" or "last"; max_turns, num_tasks are >= 1'
            )
        self._server: asyncio.subprocess.Process | None = None
        self.mode = "text"
        self.field = ""
        self.tools: list[dict[str, Any]] = []

    def _app(self) -> str:
        """The ASGI app to serve: the env arg, else openenv.yaml's `app` in the package."""
        if self.app:
            return self.app
        spec = importlib.util.find_spec(self.module)
        where = list(spec.submodule_search_locations or []) if spec else []
        if not where:
            raise WorkerError("not_openenv", f"{self.module} is not an importable package")
        manifest = Path(where[0]) / "openenv.yaml"
        app = "server.app:app"
        if manifest.is_file():
            for line in manifest.read_text("utf-8").splitlines():
                key, _, value = line.partition(":")
                if key.strip() == "app" and value.strip():
                    app = value.strip().strip("\"'")
        return f"{self.module}.{app}"

    async def start(self) -> None:
        if not self.url:
            port = _free_port()
            log = Path.cwd() / "openenv-server.log"  # beside the worker's own log
            fd = os.open(log, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
            try:
                self._server = await asyncio.create_subprocess_exec(
                    sys.executable, "-m", "uvicorn", self._app(), "--host", "127.0.0.1",
                    "--port", str(port), "--log-level", "warning",
                    stdin=asyncio.subprocess.DEVNULL, stdout=fd, stderr=fd,
                )  # fmt: skip
            finally:
                os.close(fd)
            self.url = f"http://127.0.0.1:{port}"
            await self._wait_healthy(str(log))
        try:
            schemas = await asyncio.to_thread(_get_json, f"{self.url}/schema", 30.0)
        except (OSError, ValueError) as exc:
            raise WorkerError(
                OPENENV_SERVER_DIED, f"the OpenEnv server at {self.url} does not answer: {exc}"
            ) from None
        action = dict(schemas.get("action") or {})
        properties = dict(action.get("properties") or {})
        strings = [n for n, p in properties.items() if p.get("type") == "string"]
        self.action_schema = action
        self.tools = await self._mcp_tools()
        if self.tools:
            self.mode = "mcp"
        elif len(properties) - ("metadata" in properties) == 1 and len(strings) == 1:
            self.mode, self.field = "text", strings[0]
        else:
            self.mode = "act"
            schema = {k: v for k, v in action.items() if k not in ("title", "description")}
            schema["properties"] = {k: v for k, v in properties.items() if k != "metadata"}
            self.tools = [
                {
                    "type": "function",
                    "function": {
                        "name": "act",
                        "description": str(action.get("description") or "Take an action."),
                        "parameters": schema,
                    },
                }
            ]

    async def _wait_healthy(self, log: str) -> None:
        deadline = asyncio.get_running_loop().time() + float(
            os.environ.get("PRIME_OPENENV_START_TIMEOUT", "300")
        )
        while True:
            assert self._server is not None
            if self._server.returncode is not None:
                tail = Path(log).read_bytes()[-1500:].decode(errors="replace")
                raise WorkerError(
                    OPENENV_SERVER_DIED,
                    f"the OpenEnv server ({self._app()}) exited with status "
                    f"{self._server.returncode}: {tail}",
                )
            try:
                await asyncio.to_thread(_get_json, f"{self.url}/health", 2.0)
                return
            except (OSError, ValueError):
                if asyncio.get_running_loop().time() > deadline:
                    raise WorkerError(
                        OPENENV_SERVER_DIED, f"the OpenEnv server at {self.url} never answered"
                    ) from None
                await asyncio.sleep(0.2)

    async def close(self) -> None:
        if self._server is not None and self._server.returncode is None:
            self._server.kill()
            await self._server.wait()

    async def _reset(self, seed: int) -> tuple[Any, Any]:
        """A client with a session of its own, reset with `seed`. A server at its session limit
        (`max_concurrent_envs`) answers CAPACITY_REACHED, or just closes the new connection
        cleanly, and is waited for while its /health answers: its sessions end with their
        rollouts."""
        from websockets.exceptions import ConnectionClosedOK

        while True:
            client = self.client_type(base_url=self.url, message_timeout_s=600.0)
            try:
                return client, await client.reset(seed=seed, **self.reset_args)
            except (RuntimeError, ConnectionClosedOK) as exc:
                await client.close()
                if isinstance(exc, RuntimeError) and _CAPACITY not in str(exc):
                    raise
                await asyncio.to_thread(_get_json, f"{self.url}/health", 5.0)  # else: gone
            except BaseException:
                await client.close()
                raise
            await asyncio.sleep(0.1)

    async def _mcp_tools(self) -> list[dict[str, Any]]:
        """The server's MCP tools (a `list_tools` step), or none: a server whose actions are
        not MCP calls refuses that step."""
        from websockets.exceptions import WebSocketException

        try:
            client, _ = await self._reset(0)
        except (OSError, WebSocketException) as exc:
            raise WorkerError(
                OPENENV_SERVER_DIED, f"the OpenEnv server at {self.url} does not answer: {exc}"
            ) from None
        try:
            listed = await client.step({"type": "list_tools"})
        except RuntimeError:
            return []
        finally:
            await client.close()
        tools = []
        for tool in listed.observation.get("tools") or []:
            schema = tool.get("input_schema") or tool.get("inputSchema") or {"type": "object"}
            tools.append(
                {
                    "type": "function",
                    "function": {
                        "name": str(tool["name"]),
                        "description": str(tool.get("description") or ""),
                        "parameters": schema,
                    },
                }
            )
        return tools

    def hello(self) -> dict[str, Any]:
        import importlib.metadata

        return {
            "name": self.module,
            "version": None,
            "framework": f"openenv-core {importlib.metadata.version('openenv-core')}",
            "rubric": {
                "rewards": {"reward": 1.0},
                "metrics": ["steps", "last_reward"],
                "group": False,
            },
        }

    def tasks(self, split: str) -> list[dict[str, Any]]:
        return [
            {
                "id": f"seed-{seed}",
                "prompt": [{"role": "user", "content": f"reset(seed={seed})"}],
                "answer": None,
                "info": {"openenv": {"seed": seed}},
            }
            for seed in range(self.num_tasks)
        ]

    def _system(self) -> str:
        if self.system_prompt:
            return str(self.system_prompt)
        what = f"the environment {self.module}"
        if self.mode == "text":
            field = dict(self.action_schema.get("properties") or {}).get(self.field, {})
            about = f" ({field['description']})" if field.get("description") else ""
            return (
                f"You act in {what}. Each observation comes as a message; each reply of yours "
                f"is your next action: its text is the action's `{self.field}`{about}."
            )
        return (
            f"You act in {what}. Each observation comes as a message or a tool result; act by "
            "calling the tools."
        )

    @staticmethod
    def _render(observation: Any) -> str:
        """An observation as text: an MCP call's result (its text parts) or error, the only
        text field, else the fields as JSON."""
        shown = {k: v for k, v in dict(observation or {}).items() if k not in _RENDER_SKIP}
        if "tool_name" in shown and ("result" in shown or "error" in shown):
            error, result = shown.get("error"), shown.get("result")
            if error:
                return f"Error: {error.get('message') if isinstance(error, dict) else error}"
            if isinstance(result, dict) and isinstance(result.get("content"), list):
                texts = [str(c.get("text", "")) for c in result["content"] if isinstance(c, dict)]
                return "\n".join(texts)
            return result if isinstance(result, str) else json.dumps(result, default=str)
        if len(shown) == 1 and isinstance(next(iter(shown.values())), str):
            return str(next(iter(shown.values())))
        return json.dumps(shown, default=str)

    async def rollout(
        self, key: str, task_id: str, model: dict[str, Any], sampling: dict[str, Any]
    ) -> dict[str, Any]:
        import openai
        from websockets.exceptions import WebSocketException

        gone = (OSError, asyncio.TimeoutError, WebSocketException)
        seed = int(task_id.removeprefix("seed-"))
        llm = openai.AsyncOpenAI(
            base_url=str(model["base_url"]), api_key=str(model["api_key"]), max_retries=0
        )
        client = None
        rewards: list[float] = []
        try:
            try:
                client, result = await self._reset(seed)
            except gone as exc:
                return _server_died(self.url, exc)
            except RuntimeError as exc:  # the server answered with an error
                return {"error": {"type": "openenv_error", "message": f"reset: {exc}"}}
            messages: list[dict[str, Any]] = [
                {"role": "system", "content": self._system()},
                {"role": "user", "content": self._render(result.observation)},
            ]
            stop = "max_turns"
            for _turn in range(self.max_turns):
                create: Any = llm.chat.completions.create  # messages as plain dicts
                reply = await create(
                    model=str(model["model"]),
                    messages=messages,
                    **({"tools": self.tools} if self.tools else {}),
                )
                message = reply.choices[0].message
                messages.append(message.model_dump(mode="json", exclude_none=True))
                calls = list(message.tool_calls or [])
                if self.mode == "text":
                    actions = [(None, {self.field: message.content or ""})]
                elif not calls:
                    stop = "completed"
                    break
                else:
                    actions = [(call, self._action(call)) for call in calls]
                done = False
                for call, action in actions:
                    try:
                        result = await client.step(action)
                    except gone as exc:
                        return _server_died(self.url, exc)
                    except RuntimeError as exc:  # the server refused the action: feedback
                        text = f"Error: {exc}"
                        messages.append(
                            {"role": "user", "content": text}
                            if call is None
                            else _tool_message(call, text)
                        )
                        continue
                    rewards.append(float(result.reward or 0.0))
                    text = self._render(result.observation)
                    messages.append(
                        {"role": "user", "content": text}
                        if call is None
                        else _tool_message(call, text)
                    )
                    done = done or bool(result.done)
                if done:
                    stop = "env_done"
                    break
        finally:
            if client is not None:
                await client.close()
            await llm.close()
        total = sum(rewards) if self.reward_mode == "sum" else (rewards[-1] if rewards else 0.0)
        return {
            "scores": {
                "rewards": {"reward": total},
                "metrics": {
                    "steps": float(len(rewards)),
                    "last_reward": rewards[-1] if rewards else 0.0,
                },
                "weights": {"reward": 1.0},
            },
            "stop_reason": stop,
        }

    def _action(self, call: Any) -> dict[str, Any]:
        try:
            arguments = json.loads(call.function.arguments or "{}")
        except ValueError:
            arguments = {}
        if self.mode == "mcp":
            return {"type": "call_tool", "tool_name": call.function.name, "arguments": arguments}
        return dict(arguments) if isinstance(arguments, dict) else {}


def _tool_message(call: Any, content: str) -> dict[str, Any]:
    return {"role": "tool", "tool_call_id": call.id, "content": content}


def _server_died(url: str, exc: BaseException) -> dict[str, Any]:
    message = f"{type(exc).__name__}: {exc}"
    return {
        "error": {
            "type": OPENENV_SERVER_DIED,
            "message": f"the OpenEnv server at {url} went away: {message}",
        }
    }


# ------------------------------------------------------------------------------- prime_env


class PrimeEnvAdapter(Adapter):
    """An environment of this SDK, in a virtualenv of its own because its other dependencies
    clash with the runner's; the SDK there runs its harness and rubric as in-process."""

    kind = "prime_env"

    def __init__(self, env_id: str, env_args: dict[str, Any]) -> None:
        import prime_env

        self.env = prime_env.load(env_id, **env_args)
        self._tasks = {
            split: {task.id: task for task in tasks}
            for split, tasks in (("train", self.env.tasks), ("eval", self.env.get_eval_tasks()))
        }
        self._states: dict[str, Any] = {}

    def hello(self) -> dict[str, Any]:
        rubric = self.env.rubric
        return {
            "name": self.env.name,
            "version": self.env.version,
            "framework": "prime_env",
            "rubric": {
                "rewards": {f.name: f.weight for f in rubric.funcs if f.weight and not f.group},
                "metrics": [f.name for f in rubric.funcs if not f.weight],
                "group": rubric.has_group_funcs,
                "group_rewards": {f.name: f.weight for f in rubric.funcs if f.weight and f.group},
            },
            "correctness": self.env.correctness,
        }

    def tasks(self, split: str) -> list[dict[str, Any]]:
        return [
            {"id": t.id, "prompt": t.prompt, "answer": t.answer, "info": t.info}
            for t in self._tasks[split].values()
        ]

    async def rollout(
        self, key: str, task_id: str, model: dict[str, Any], sampling: dict[str, Any]
    ) -> dict[str, Any]:
        from prime_env.clients.openai_client import OpenAIClient
        from prime_env.runner import error_info

        task = self._tasks["eval"].get(task_id) or self._tasks["train"].get(task_id)
        if task is None:
            raise WorkerError("unknown_task", f"no task {task_id!r} in this worker")
        client = OpenAIClient(
            model=str(model["model"]), base_url=str(model["base_url"]), api_key=model["api_key"]
        )
        harness, rubric = self.env.harness, self.env.rubric
        state = harness.start(task)
        try:
            await harness.execute(client, state)
            scores = await rubric.score_rollout(state)
        except Exception as exc:  # noqa: BLE001 - the rollout's error, as the runner records it
            error = error_info(exc)
            return {"error": {"type": error.type, "message": error.message}}
        finally:
            await client.aclose()
        if rubric.has_group_funcs:
            self._states[key] = state
        return {
            "scores": {
                "rewards": scores.rewards,
                "metrics": scores.metrics,
                "weights": {f.name: f.weight for f in rubric.funcs},
            },
            "stop_reason": state.stop_reason,
        }

    async def score_group(self, keys: list[str]) -> list[dict[str, Any]]:
        states = [self._states.pop(key) for key in keys if key in self._states]
        if len(states) != len(keys):
            raise WorkerError("unknown_rollout", "a rollout of this group is not kept here")
        scored = await self.env.rubric.score_group(states)
        return [{"rewards": s.rewards, "metrics": s.metrics} for s in scored]

    def forget(self, keys: list[str]) -> None:
        for key in keys:
            self._states.pop(key, None)


# ------------------------------------------------------------------------------- serving


def make_adapter(kind: str, env_id: str, env_args: dict[str, Any]) -> Adapter:
    if kind == "verifiers":
        return VerifiersAdapter(env_id, env_args)
    if kind == "prime_env":
        return PrimeEnvAdapter(env_id, env_args)
    if kind == "openenv":
        return OpenEnvAdapter(env_id, env_args)
    raise WorkerError("unknown_kind", f"no adapter for environments of kind {kind!r}")


class Worker:
    def __init__(self, adapter: Adapter) -> None:
        self.adapter = adapter
        self.hello = {"op": "hello", "protocol": wire.PROTOCOL, "kind": adapter.kind}
        self.hello.update(adapter.hello())

    async def serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        """One runner connection: hello, then requests answered as they finish."""
        writer.write(wire.encode(self.hello))
        pending: set[asyncio.Task[None]] = set()
        lock = asyncio.Lock()

        async def answer(request: dict[str, Any]) -> None:
            reply: dict[str, Any] = {"id": request.get("id")}
            try:
                reply["result"] = await self.handle(request)
            except WorkerError as exc:
                reply["error"] = {"type": exc.error_type, "message": exc.message}
            except Exception as exc:  # noqa: BLE001 - answered, the worker keeps serving
                reply["error"] = {
                    "type": "worker_error",
                    "message": f"{type(exc).__name__}: {exc}",
                    "traceback": traceback.format_exc(limit=20),
                }
            async with lock:
                writer.write(wire.encode(reply))
                await writer.drain()

        try:
            while True:
                request = await wire.read_message(reader)
                if request is None:
                    break
                job = asyncio.ensure_future(answer(request))
                pending.add(job)
                job.add_done_callback(pending.discard)
        except (wire.ProtocolError, ConnectionError):
            pass
        finally:
            for job in pending:
                job.cancel()
            writer.close()

    async def handle(self, request: dict[str, Any]) -> Any:
        op = request.get("op")
        adapter = self.adapter
        if op == "tasks":
            return await asyncio.to_thread(adapter.tasks, str(request.get("split", "eval")))
        if op == "rollout":
            return await adapter.rollout(
                str(request["key"]),
                str(request["task_id"]),
                dict(request["model"]),
                dict(request.get("sampling") or {}),
            )
        if op == "score_group":
            return await adapter.score_group([str(k) for k in request["keys"]])
        if op == "forget":
            adapter.forget([str(k) for k in request["keys"]])
            return None
        raise WorkerError("unknown_op", f"unknown op {op!r}")


def _exit_with_parent() -> None:
    """The runner holds our stdin: when it goes, so do we and everything we started."""

    def watch() -> None:
        try:
            while sys.stdin.buffer.read(1 << 16):
                pass
        finally:
            _kill_group()

    threading.Thread(target=watch, daemon=True, name="parent-watch").start()


def _kill_group() -> None:
    try:
        os.killpg(os.getpgid(0), signal.SIGKILL)
    finally:
        os._exit(0)


async def main(args: argparse.Namespace) -> int:
    try:
        adapter = make_adapter(args.kind, args.env, json.loads(args.env_args))
        await adapter.start()
        worker = Worker(adapter)
        kind, where, port = wire.parse_address(args.listen)
        if kind == "unix":
            server = await asyncio.start_unix_server(worker.serve, where, limit=1 << 20)
            address = args.listen
        else:
            server = await asyncio.start_server(worker.serve, where, port, limit=1 << 20)
            host, bound = server.sockets[0].getsockname()[:2]
            address = f"tcp:{host}:{bound}"
    except BaseException as exc:  # noqa: BLE001 - reported to the runner, which explains it
        failure = {
            "type": getattr(exc, "error_type", type(exc).__name__),
            "message": str(exc),
            "traceback": traceback.format_exc(limit=30),
        }
        print("FAILED " + json.dumps(failure), flush=True)
        return 1
    print(f"READY {address}", flush=True)
    async with server:
        try:
            await server.serve_forever()
        finally:
            await adapter.close()
    return 0


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--kind", required=True, choices=("verifiers", "prime_env", "openenv"))
    parser.add_argument("--env", required=True, help="its module, path or URL")
    parser.add_argument("--env-args", default="{}", help="its arguments, as a JSON object")
    parser.add_argument("--listen", required=True, help="unix:PATH or tcp:HOST:PORT")
    return parser.parse_args(argv)


if __name__ == "__main__":
    _exit_with_parent()
    sys.exit(asyncio.run(main(parse_args())))
