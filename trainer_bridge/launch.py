"""Start, resume and finish a training run: the run dir, the child processes, the backend.

`prime train` (prime_cli) is a thin shell over this: it resolves the config, installs and
loads the environment, then calls `start`/`resume` and `execute`. Everything a notebook or a
script would also need to launch a run lives here.
"""

from __future__ import annotations

import asyncio
import os
import shlex
import signal
import sys
import threading
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rich.console import Console

from prime_env.environment import Environment
from prime_env.process import event_loop
from prime_env.run_status import RUNNING, describe_owner, held_by_another
from trainer_bridge import checkpoints
from trainer_bridge.backends.base import InferenceBackend
from trainer_bridge.config import (
    ConfigError,
    TrainConfig,
    differences,
    load_resolved,
)
from trainer_bridge.evals import evaluate
from trainer_bridge.metrics import Monitor, plot
from trainer_bridge.orchestrator import (
    BackendFactory,
    Orchestrator,
    TrainingStopped,
    reward_weights,
    trainer_command,
)
from trainer_bridge.run_dir import RunDir, write_text_atomic
from trainer_bridge.supervisor import ChildDied, Supervisor

SHUTDOWN_BOUND_S = 60.0


def check_env(config: TrainConfig, env: Environment) -> None:
    """What can be refused once the env is loaded and before any model loads (exit 2)."""
    if len(env.tasks) == 0:
        raise ConfigError(
            f"{env.id} with args {config.env.args} has an empty train split (its eval split "
            "took every task?); pass -a with more examples or another difficulty"
        )
    reward_weights(env, config.orchestrator.reward.weights)


def backend_kind(config: TrainConfig) -> str:
    kind = config.inference.backend
    if kind != "auto":
        return kind
    if config.inference.urls:
        return "external"
    try:
        import torch

        cuda = bool(torch.cuda.is_available())
    except ImportError:
        cuda = False
    if cuda:
        try:
            import vllm  # noqa: F401

            return "vllm"
        except ImportError:
            pass
    return "torch"


def vllm_urls(config: TrainConfig) -> list[str]:
    return config.inference.urls or ["http://127.0.0.1:8000/v1"]


def vllm_command(config: TrainConfig, url: str) -> list[str]:
    """`vllm serve` with runtime LoRA loading and token-exact responses (see vllm_backend)."""
    from urllib.parse import urlparse

    parsed = urlparse(url)
    argv = [
        "vllm",
        "serve",
        config.model.name,
        "--host",
        parsed.hostname or "127.0.0.1",
        "--port",
        str(parsed.port or 8000),
        "--return-tokens-as-token-ids",
        "--logprobs-mode",
        "processed_logprobs",
        "--gpu-memory-utilization",
        str(config.inference.gpu_memory_utilization),
    ]
    if config.model.lora is not None:
        rank = config.model.lora.rank
        argv += ["--enable-lora", "--max-lora-rank", str(rank)]
        argv += [
            "--max-loras",
            str(config.inference.max_loras or config.orchestrator.max_off_policy_steps + 2),
        ]
    return argv + list(config.inference.extra_args)


def host_commands(config: TrainConfig, run_root: Path) -> dict[str, dict[str, str]]:
    """What `--dry-run` prints: each host's processes as shell command lines."""
    run = RunDir(run_root)
    local: dict[str, str] = {
        "orchestrator": f"prime train resume {shlex.quote(str(run_root))}  (this process)",
        "trainer": shlex.join(trainer_command(run, sys.executable)),
    }
    kind = backend_kind(config)
    hosts: dict[str, dict[str, str]] = {"localhost": local}
    if kind == "torch":
        local["inference"] = "in-process torch sampler (backend torch)"
    elif kind == "vllm":
        for i, url in enumerate(vllm_urls(config)):
            from urllib.parse import urlparse

            host = urlparse(url).hostname or "127.0.0.1"
            name = "localhost" if host in ("127.0.0.1", "localhost", "::1") else host
            env = "VLLM_ALLOW_RUNTIME_LORA_UPDATING=1 "
            hosts.setdefault(name, {})[f"inference[{i}]"] = env + shlex.join(
                vllm_command(config, url)
            )
    else:
        local["inference"] = "external servers: " + ", ".join(config.inference.urls)
    return hosts


@dataclass
class Prepared:
    """A run ready to execute: its directory, config, and where it continues from."""

    run: RunDir
    config: TrainConfig
    env_spec: str
    resume: checkpoints.OrchestratorState | None = None


def start(config: TrainConfig, env: Environment, env_spec: str) -> Prepared:
    """Create the run dir and write the resolved config and run.json."""
    run = RunDir.new(
        config.output_dir.resolve(),
        env.name or env_spec,
        Path(config.model.name).name,
        config.run_name,
    )
    write_text_atomic(run.resolved_config, config.to_toml())
    run.update_run_json(
        status="created",
        run_id=run.run_id,
        env=env_spec,
        env_version=env.version,
        model=config.model.name,
        config_digest=config.digest(),
        pushes=[],
    )
    return Prepared(run, config, env_spec)


def resume(
    run_root: Path, overrides: Callable[[TrainConfig], TrainConfig] | None = None
) -> Prepared:
    """Reopen a run at its newest STABLE checkpoint; refuse changed config beyond the
    resumable keys (max_steps, orchestrator.eval, monitors, ckpt), listing the differences."""
    run = RunDir(run_root)
    if not run.resolved_config.is_file():
        raise ConfigError(
            f"{run_root} is not a prime train run directory (no config/resolved.toml)"
        )
    info = run.read_run_json()
    if held_by_another(info):
        raise ConfigError(
            f"refusing to resume {run_root}: it is still running ({describe_owner(info)}); "
            "stop it first (SIGTERM or Ctrl-C stops it resumably)"
        )
    stored = load_resolved(run.resolved_config)
    config = overrides(stored) if overrides is not None else stored
    diff = differences(stored, config)
    if diff:
        raise ConfigError(
            "refusing to resume with a changed config (only max_steps, orchestrator.eval, "
            "monitors and ckpt may change):\n  " + "\n  ".join(diff)
        )
    state = checkpoints.latest(run)
    if state is not None and state.config_digest != stored.digest():
        raise ConfigError(f"the checkpoint at step {state.step} was written by another config")
    step = state.step if state is not None else 0
    checkpoints.discard_after(run, step)
    if config != stored:
        write_text_atomic(run.resolved_config, config.to_toml())
    env_spec = str(info.get("env") or config.env.id)
    return Prepared(run, config, env_spec, state)


def make_backend_factory(
    config: TrainConfig, supervisor: Supervisor, run: RunDir
) -> BackendFactory:
    kind = backend_kind(config)

    async def torch_backend() -> InferenceBackend:
        from trainer_bridge.backends.torch_backend import TorchBackend

        backend = TorchBackend(config.model, threads=1)
        await backend.client().ensure_loaded()
        return backend

    async def vllm_backend() -> InferenceBackend:
        from trainer_bridge.backends.vllm_backend import VLLMBackend

        backend = VLLMBackend(
            config.model.name, vllm_urls(config) if kind == "vllm" else config.inference.urls
        )
        await backend.wait_ready(timeout_s=900 if kind == "vllm" else 60, check=supervisor.check)
        return backend

    if kind == "torch":
        return torch_backend
    if kind == "vllm" and not any(c.name.startswith("vllm") for c in supervisor.children):
        environ = dict(os.environ, VLLM_ALLOW_RUNTIME_LORA_UPDATING="1")
        for i, url in enumerate(vllm_urls(config)):
            supervisor.start(
                f"vllm[{i}]", vllm_command(config, url), run.logs / f"vllm_{i}.log", env=environ
            )
    return vllm_backend


class ShutdownGuard:
    """SIGTERM/SIGINT handling for a run, and the hard bound on its way out.

    The first signal cancels the training task (in-flight rollouts are cancelled, the sampler
    stops between two tokens, the children are stopped, run.json says `interrupted`) and arms
    a timer: if the process has not finished exiting `bound_s` later, the timer kills the
    children, writes run.json and leaves with `os._exit`, whatever is still running (a worker
    thread in a C call, a hung close). A second signal takes that exit at once. The end of a
    run arms the same timer, so a teardown that hangs (an eval or a batch still in flight at
    max_steps, prime-rl#2912) is bounded too.
    """

    def __init__(self, run: RunDir, supervisor: Supervisor, bound_s: float = SHUTDOWN_BOUND_S):
        self.run = run
        self.supervisor = supervisor
        self.bound_s = bound_s
        self.signum: int | None = None
        self.status, self.code, self.message = "interrupted", 1, "interrupted"
        self._timer: threading.Timer | None = None
        self._previous: dict[int, Any] = {}

    @property
    def exit_code(self) -> int:
        """128 + the signal's number, as a shell reports it (130 Ctrl-C, 143 SIGTERM)."""
        return 128 + (self.signum or signal.SIGINT)

    def install(self) -> None:
        """Plain handlers for the code outside the event loop (set-up and teardown); only
        the main thread may set them (a run started from another thread keeps the caller's)."""
        if threading.current_thread() is not threading.main_thread():
            return
        for sig in (signal.SIGTERM, signal.SIGINT):
            previous = signal.signal(sig, self._on_signal)
            self._previous.setdefault(sig, previous)

    def restore(self) -> None:
        for sig, previous in self._previous.items():
            signal.signal(sig, previous)
        if self._timer is not None:
            self._timer.cancel()

    def _on_signal(self, signum: int, _frame: Any) -> None:
        self.signalled(signum)
        raise KeyboardInterrupt

    def signalled(self, signum: int) -> None:
        """Record the first signal and arm the bound (the caller then cancels what runs);
        a second signal exits now."""
        if self.signum is not None:
            self.expire()
        self.signum = signum
        self.arm("interrupted", self.exit_code, f"interrupted by {signal.Signals(signum).name}")

    def arm(self, status: str, code: int, message: str) -> None:
        """From now on the process has `bound_s` to exit; if it does not, exit as `status`
        (after a signal, always as `interrupted`)."""
        if self.signum is None or status == "interrupted":
            self.status, self.code, self.message = status, code, message
        if self._timer is None:
            self._timer = threading.Timer(self.bound_s, self.expire)
            self._timer.daemon = True
            self._timer.start()

    def expire(self) -> None:
        message = f"{self.message}; shutdown exceeded {self.bound_s:.0f} s, exited regardless"
        try:
            sys.stderr.write(f"{message}\nresume with: prime train resume {self.run.root}\n")
            self.supervisor.stop_all(grace_s=0)
            self.run.set_status(self.status, error=message)
        finally:
            os._exit(self.code)


def execute(prepared: Prepared, env: Environment, console: Console) -> int:
    """Run (or continue) training to max_steps; return the exit status (0 done, 1 stopped,
    128 + the signal when interrupted by SIGINT or SIGTERM)."""
    run, config = prepared.run, prepared.config
    supervisor = Supervisor()
    guard = ShutdownGuard(run, supervisor)
    guard.install()
    monitor = Monitor(run, config.monitors, console)
    run.set_status(RUNNING, error=None)
    status, code, message = "failed", 1, ""
    try:
        supervisor.start(
            "trainer",
            trainer_command(run, sys.executable, prepared.resume.step if prepared.resume else 0),
            run.logs / "trainer.log",
            env=dict(os.environ, PYTHONUNBUFFERED="1"),
        )
        factory = make_backend_factory(config, supervisor, run)

        async def eval_hook(version: int, backend: InferenceBackend) -> dict[str, float]:
            return await evaluate(config, run, env, prepared.env_spec, version, backend)

        orchestrator = Orchestrator(
            config,
            run,
            env,
            factory,
            supervisor,
            monitor,
            evaluate=eval_hook,
            resume=prepared.resume,
            log=lambda text: console.print(text),
        )
        try:
            event_loop.run(_until_signalled(orchestrator.run_training(), guard))
        finally:
            guard.install()  # the loop's handlers are gone; a signal now still counts
        status, code = "completed", 0
    except (TrainingStopped, ChildDied) as exc:
        message = str(exc)
        console.print(f"[red]stopped:[/red] {exc}")
        console.print(f"resume with: prime train resume {run.root}")
    except (KeyboardInterrupt, asyncio.CancelledError):
        status, code = "interrupted", guard.exit_code
        message = guard.message
        console.print(f"{message}; resume with: prime train resume {run.root}")
    finally:  # whatever ended the run (an unexpected exception too)
        code = _wind_down(guard, supervisor, monitor, status, code, message)
    return code


def _wind_down(
    guard: ShutdownGuard,
    supervisor: Supervisor,
    monitor: Monitor,
    status: str,
    code: int,
    message: str,
) -> int:
    """Stop the children and record the outcome, within the guard's bound; return the code."""
    run = guard.run
    try:
        guard.arm(status, code, message)
        supervisor.stop_all(grace_s=10)
        run.set_status(status, error=message or None)
        monitor.close()
        if status == "completed":  # a stopped run exits at once; `prime train plot` draws it
            _plot_quietly(run)
    except KeyboardInterrupt:  # a signal during the teardown: stop the children now
        supervisor.stop_all(grace_s=0)
        if status != "completed":
            status, code, message = "interrupted", guard.exit_code, guard.message
        run.set_status(status, error=message or None)
    finally:
        guard.restore()
    return code


async def _until_signalled(coro: Any, guard: ShutdownGuard) -> None:
    """Run `coro`; SIGTERM or SIGINT (a scheduler, Ctrl-C) cancels it, so in-flight rollouts
    are cancelled and the children stopped on the way out, within the guard's bound. The
    loop's own handlers: a `signal.signal` handler would only run between bytecodes, which
    the event loop may not reach while it waits."""
    loop = asyncio.get_running_loop()
    task = asyncio.ensure_future(coro)

    def on_signal(signum: int) -> None:
        guard.signalled(signum)
        task.cancel()

    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, on_signal, sig)
    outcome = ("failed", 1, "stopped")
    try:
        await task
        outcome = ("completed", 0, "")
    except (TrainingStopped, ChildDied) as exc:
        outcome = ("failed", 1, str(exc))
        raise
    finally:
        # The loop's teardown waits for its worker threads: from here on the bound holds.
        guard.arm(*outcome)
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.remove_signal_handler(sig)


def _plot_quietly(run: RunDir) -> None:
    from trainer_bridge.evals import read_evals

    try:
        plot(run.metrics, run.plots / "train.png", read_evals(run.root))
    except ValueError:
        pass  # no metrics yet
