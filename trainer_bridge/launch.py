"""Start, resume and finish a training run: the run dir, the trainer child, the orchestrator.

`prime train` (prime_cli) is a thin shell over this: it resolves the config, installs and
loads the environment, then calls `start`/`resume` and `execute`. Everything a notebook or a
script would also need to launch a run lives here; the backend comes from inference/factory.py
and signals are shutdown.py's.
"""

from __future__ import annotations

import asyncio
import os
import shlex
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from rich.console import Console

from prime_env.environment import Environment
from prime_env.process import event_loop
from prime_env.run_status import COMPLETED, RUNNING, describe_owner, held_by_another
from registry_index.files import write_atomic
from trainer_bridge.checkpoints import layout, orchestrator_state
from trainer_bridge.children import ChildDied, ChildProcesses, StartFailed
from trainer_bridge.config import ConfigError, TrainConfig, differences
from trainer_bridge.config_loader import load_resolved, to_toml
from trainer_bridge.extend import Schedule, check_steps_left, extended
from trainer_bridge.inference.base import InferenceBackend
from trainer_bridge.inference.factory import (
    backend_choice,
    check_servable,
    inference_commands,
    make_backend_factory,
)
from trainer_bridge.inference.local_teacher import LocalTeacher
from trainer_bridge.inference.teachers import Teachers
from trainer_bridge.metrics import Monitor, plot
from trainer_bridge.orchestrator.errors import TrainingStopped
from trainer_bridge.orchestrator.evals import evaluate
from trainer_bridge.orchestrator.loop import Orchestrator
from trainer_bridge.orchestrator.progress import Progress
from trainer_bridge.orchestrator.rewards import reward_weights
from trainer_bridge.orchestrator.stages import EnvLoader, stage_runs
from trainer_bridge.protocol.run_dir import RunDir
from trainer_bridge.shutdown import ShutdownGuard, until_signalled


def check_env(config: TrainConfig, env: Environment, load_env: EnvLoader | None = None) -> None:
    """What can be refused once the env is loaded and before any model loads (exit 2): an
    empty split, an unknown reward name (in any stage), a model the backend cannot serve."""
    if len(env.tasks) == 0:
        raise ConfigError(
            f"{env.id} with args {config.env.args} has an empty train split (its eval split "
            "took every task?); pass -a with more examples or another difficulty"
        )
    reward_weights(env, config.orchestrator.reward.weights)
    stage_runs(config, env, load_env)
    check_servable(config)


def trainer_command(
    run: RunDir, python: str, resume_step: int = 0, world_size: int = 1, *, lab: bool = False
) -> list[str]:
    """The trainer process's command line: `python -m trainer_bridge.trainer`, under torchrun
    (one process per rank on this host, a free rendezvous port) when `world_size` > 1; with
    `lab`, `python -m trainer_bridge.lab.trainer` (the Lab trains: trainer_bridge/lab)."""
    module = ["-m", "trainer_bridge.lab.trainer" if lab else "trainer_bridge.trainer"]
    if world_size > 1 and not lab:
        launcher = ["-m", "torch.distributed.run", "--standalone"]
        module = [*launcher, "--nproc-per-node", str(world_size), *module]
    return [python, *module, "--run-dir", str(run.root), "--resume-step", str(resume_step)]


def host_commands(config: TrainConfig, run_root: Path) -> dict[str, dict[str, str]]:
    """What `--dry-run` prints: each host's processes as shell command lines."""
    run = RunDir(run_root)
    local: dict[str, str] = {
        "orchestrator": f"prime train resume {shlex.quote(str(run_root))}  (this process)",
        "trainer": shlex.join(
            trainer_command(
                run, sys.executable, world_size=config.trainer.world_size, lab=on_lab(config)
            )
        ),
    }
    hosts: dict[str, dict[str, str]] = {"localhost": local}
    for host, procs in inference_commands(config).items():
        hosts.setdefault(host, {}).update(procs)
    return hosts


def on_lab(config: TrainConfig) -> bool:
    """Whether a Lab trains and samples the run (`--lab URL`)."""
    return backend_choice(config).kind == "lab"


def trainer_env(lab: bool) -> dict[str, str]:
    """The trainer's environment: ours, unbuffered, and for a Lab the token to train with
    (passed here, never written to the run directory)."""
    env = dict(os.environ, PYTHONUNBUFFERED="1")
    if lab:
        from trainer_bridge.lab.connect import KEY_VARIABLE, lab_key

        env[KEY_VARIABLE] = lab_key()
    return env


@dataclass
class Prepared:
    """A run ready to execute: its directory, config, and where it continues from."""

    run: RunDir
    config: TrainConfig
    env_spec: str
    resume: orchestrator_state.OrchestratorState | None = None


def start(
    config: TrainConfig, env: Environment, env_spec: str, recipe: Path | None = None
) -> Prepared:
    """Create the run dir and write the resolved config and run.json (with the recipe the
    config was built on, if any, and the stages)."""
    run = RunDir.new(
        config.output_dir.resolve(),
        env.name or env_spec,
        Path(config.model.name).name,
        config.run_name,
    )
    write_atomic(run.resolved_config, to_toml(config))
    run.update_run_json(
        status="created",
        run_id=run.run_id,
        env=env_spec,
        env_version=env.version,
        model=config.model.name,
        recipe=str(recipe) if recipe else None,
        correctness=env.correctness,
        engine=backend_choice(config).kind,
        stages=stage_list(config),
        config_digest=config.digest(),
        pushes=[],
    )
    return Prepared(run, config, env_spec)


def stage_list(config: TrainConfig) -> list[dict[str, object]]:
    """run.json's `stages`: each stage's index, name and span of steps."""
    return [
        {"index": s.index, "name": s.name, "start": s.start, "end": s.end}
        for s in config.stage_plan()
    ]


def resume(
    run_root: Path,
    overrides: Callable[[TrainConfig], TrainConfig] | None = None,
    schedule: Schedule | None = None,
) -> Prepared:
    """Reopen a run at its newest STABLE checkpoint; refuse changed config beyond the
    resumable keys (max_steps, orchestrator.eval, monitors, ckpt), listing the differences.
    A run with no steps left raises AlreadyFinished at once; added steps on a decaying lr
    schedule need a `schedule` choice (trainer_bridge.extend)."""
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
    state = orchestrator_state.latest(run)
    digests = {stored.digest(), *info.get("earlier_config_digests", [])}
    if state is not None and state.config_digest not in digests:
        raise ConfigError(f"the checkpoint at step {state.step} was written by another config")
    step = state.step if state is not None else 0
    asked = config.max_steps if config.max_steps != stored.max_steps else None
    if run.status() == COMPLETED:  # an unfinished run at its last step still has its end eval
        check_steps_left(run_root, step, config.max_steps, asked)
    config = extended(stored, config, run_root, schedule)
    layout.discard_after(run, step)
    if config != stored:
        write_atomic(run.resolved_config, to_toml(config))
    if config.digest() != stored.digest():  # stages added: the checkpoints so far stay valid
        run.update_run_json(
            earlier_config_digests=sorted(digests),
            config_digest=config.digest(),
            stages=stage_list(config),
        )
    env_spec = str(info.get("env") or config.env.id)
    return Prepared(run, config, env_spec, state)


def execute(
    prepared: Prepared, env: Environment, console: Console, load_env: EnvLoader | None = None
) -> int:
    """Run (or continue) training to max_steps; return the exit status (0 done, 1 stopped or
    failed to start, 128 + the signal when interrupted by SIGINT or SIGTERM). Whatever stops
    the run, the reason is run.json's `error`."""
    run, config = prepared.run, prepared.config
    children = ChildProcesses()
    guard = ShutdownGuard(run, children)
    guard.install()
    monitor = Monitor(run, config.monitors, console)
    if config.inference.backend == "auto":
        console.print(backend_choice(config).describe())
    run.set_status(RUNNING, error=None)
    status, code, message = "failed", 1, ""
    try:
        resume_step = prepared.resume.step if prepared.resume else 0
        lab = on_lab(config)
        children.start(
            "trainer",
            trainer_command(run, sys.executable, resume_step, config.trainer.world_size, lab=lab),
            run.logs / "trainer.log",
            env=trainer_env(lab),
        )
        factory = make_backend_factory(config, children, run, lambda text: console.print(text))

        async def eval_hook(version: int, backend: InferenceBackend) -> dict[str, float]:
            return await evaluate(config, run, env, prepared.env_spec, version, backend)

        orchestrator = Orchestrator(
            config,
            run,
            env,
            factory,
            children,
            monitor,
            evaluate=eval_hook,
            resume=prepared.resume,
            log=lambda text: console.print(text),
            load_env=load_env,
            progress=Progress(run, console if config.monitors.live else None),
            teachers=Teachers(config.model, local=LocalTeacher),
        )
        try:
            event_loop.run(until_signalled(orchestrator.run_training(), guard))
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
    except StartFailed as exc:
        message = str(exc)
        console.print(f"[red]failed:[/red] {exc}")
    except Exception as exc:  # noqa: BLE001 - recorded as the run's error, never lost
        message = f"{type(exc).__name__}: {exc}"
        _log_traceback(run)
        console.print(
            f"[red]failed:[/red] {message} (traceback in {run.logs / 'orchestrator.log'})"
        )
    finally:  # whatever ended the run (an unexpected exception too)
        code = _wind_down(guard, children, monitor, status, code, message)
    return code


def _log_traceback(run: RunDir) -> None:
    import traceback

    with (run.logs / "orchestrator.log").open("a") as log:
        log.write(traceback.format_exc())


def _wind_down(
    guard: ShutdownGuard,
    children: ChildProcesses,
    monitor: Monitor,
    status: str,
    code: int,
    message: str,
) -> int:
    """Stop the children and record the outcome, within the guard's bound; return the code."""
    run = guard.run
    try:
        guard.arm(status, code, message)
        if status == "completed":  # the trainer saved its last step and ends by itself
            children.wait_exit("trainer", timeout_s=30)
        children.stop_all(grace_s=10)
        run.set_status(status, error=message or None)
        monitor.close()
        if status == "completed":  # a stopped run exits at once; `prime train plot` draws it
            _plot_quietly(run)
    except KeyboardInterrupt:  # a signal during the teardown: stop the children now
        children.stop_all(grace_s=0)
        if status != "completed":
            status, code, message = "interrupted", guard.exit_code, guard.message
        run.set_status(status, error=message or None)
    finally:
        guard.restore()
    return code


def _plot_quietly(run: RunDir) -> None:
    from trainer_bridge.orchestrator.evals import read_evals

    try:
        plot(run.metrics, run.plots / "train.png", read_evals(run.root))
    except ValueError:
        pass  # no metrics yet
