"""`prime train …`: RL on a hub environment (trainer_bridge does the work; this is the shell).

    prime train OWNER/NAME[@VER] [-m MODEL] [-c FILE.toml]... [-a ENV_ARGS] [--max-steps N]
        [--backend auto|torch|vllm|external] [--lab URL] [-o DIR] [--run-name N] [--push [--public]]
        [--no-env-recipe] [--dry-run] [--output json] [--dotted.key VALUE]...
    prime train resume RUN_DIR [--max-steps N]
    prime train plot RUN_DIR [-o PNG]
    prime train samples RUN_DIR --step N [--limit K] [--output json]
    prime train export RUN_DIR [--step N] [--merge] -o DIR

The environment's own recipe for the model (`<package>/train/<model>.toml`) is the layer
under `-c` files and flags (recipes.py).

A bad config, an unknown environment or an empty train split exits 2 before any model loads;
a run that stops (dead child, failed probe, repeated sampler failure) exits 1, resumable.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import Any

import click

from hub_client import settings as cfg
from hub_client.client import HubClient, HubError
from hub_client.install import InstallError, ensure_installed
from prime_cli.errors import CliError
from prime_cli.feedback import console_feedback
from prime_cli.messages import message_console
from prime_cli.options import json_object
from prime_cli.program_host import program_on_host_option
from prime_cli.train.algo import algo_flags, check_whole_run, self_teacher_warnings
from prime_cli.train.help import common_options_text
from prime_cli.train.recipes import choose_recipe
from trainer_bridge.outcome import outcome_lines, read_outcome

console = message_console(stderr=True)


def config_exit(message: str) -> CliError:
    """A wrong config, name or argument: exit status 2, nothing started."""
    return CliError(message, status=2)


class TrainGroup(click.Group):
    """`prime train OWNER/NAME …` runs; `prime train resume|plot|samples|export …` are
    subcommands."""

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        if "--help-all" in args:
            from prime_cli.train.help import print_all_keys

            print_all_keys()
            ctx.exit(0)
        if args and args[0] not in self.commands and args[0] not in ("-h", "--help"):
            args = ["run", *args]
        return super().parse_args(ctx, args)

    def format_options(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        """The run's own flags and the common config keys come first (a run is what most
        readers want), then the subcommands."""
        from prime_cli.train.help import common_options_text

        run = self.commands["run"]
        options = [p for p in run.get_params(ctx) if isinstance(p, click.Option)]
        rows = [r for p in options if (r := p.get_help_record(ctx)) is not None]
        rows.append(("--help-all", "every config key, with its type and default"))
        with formatter.section("Options of a run (prime train OWNER/NAME ...)"):
            formatter.write_dl(rows)
        formatter.write_paragraph()
        for line in common_options_text().splitlines():
            formatter.write(line + "\n")
        self.format_commands(ctx, formatter)


@click.group("train", cls=TrainGroup)
def train() -> None:
    """Train a model on a hub environment with async RL (torch on CPU, vLLM on GPU).

    \b
    prime train OWNER/NAME[@VER] [-m MODEL] [-c FILE.toml]... [--dotted.key VALUE]...
    """


@train.command(
    "run",
    hidden=True,
    context_settings={"ignore_unknown_options": True, "allow_extra_args": True},
    epilog="\b\n" + common_options_text(),
)
@click.argument("env_spec", metavar="OWNER/NAME[@VER]", required=False)
@click.option("-m", "--model", help="model.name: local/smollm2-135m or a Hugging Face model dir")
@click.option(
    "-c", "--config", "configs", multiple=True, type=Path, help="TOML config (repeatable)"
)
@click.option("-a", "--env-args", help="JSON object passed to load_environment")
@click.option(
    "--max-steps", type=click.IntRange(min=1), help="optimizer steps to train (max_steps)"
)
@click.option("--backend", type=click.Choice(["auto", "torch", "vllm", "external", "lab"]))
@click.option(
    "--lab",
    "lab_url",
    metavar="URL",
    help="train and sample on a hub's Lab (HUB/lab) with your train-scoped token "
    "(prime login or PRIME_API_KEY); the orchestrator and the env stay here",
)
@click.option(
    "-o", "--output-dir", type=Path, help="where outputs/train/… goes (default ./outputs)"
)
@click.option("--run-name", help="the run directory's name (default: a timestamp)")
@click.option("--push", is_flag=True, help="upload the step-0 and final evals to the hub")
@click.option("--public", is_flag=True, help="with --push: show them on the leaderboard")
@click.option(
    "--no-env-recipe",
    is_flag=True,
    help="ignore the recipe the environment ships for the model (train/<model>.toml)",
)
@click.option(
    "--algo",
    help="orchestrator.algo.type for the whole run: grpo, sft, rft, opd, or a registered one",
)
@click.option(
    "--data",
    help="--algo sft: a JSONL file (prime eval export's), an eval run directory, a run id or a "
    "hub evaluation id",
)
@click.option(
    "--teacher",
    help="orchestrator.algo.teacher.model: any -m model spec, a policy directory, or reference",
)
@click.option("--dry-run", is_flag=True, help="validate, print each host's command, start nothing")
@click.option("--output", type=click.Choice(["table", "json"]), default="table", show_default=True)
@program_on_host_option
@click.pass_context
def run_cmd(
    ctx: click.Context,
    env_spec: str | None,
    model: str | None,
    configs: tuple[Path, ...],
    env_args: str | None,
    max_steps: int | None,
    backend: str | None,
    lab_url: str | None,
    output_dir: Path | None,
    run_name: str | None,
    push: bool,
    public: bool,
    no_env_recipe: bool,
    algo: str | None,
    data: str | None,
    teacher: str | None,
    dry_run: bool,
    output: str,
) -> None:
    """Train on OWNER/NAME[@VER] (installed from the hub when missing), from the recipe the
    environment ships for the model when there is one."""
    from trainer_bridge.config import ConfigError
    from trainer_bridge.config_loader import build_config, parse_flags, to_toml

    if lab_url and backend not in (None, "lab"):
        raise config_exit(f"--lab trains and samples on the Lab; drop --backend {backend}")
    try:
        extra_files, overrides = parse_flags(ctx.args)
        flags: list[tuple[str, Any]] = []
        for key, value in (
            ("model.name", model),
            ("max_steps", max_steps),
            ("inference.backend", "lab" if lab_url else backend),
            ("inference.urls", [lab_url] if lab_url else None),
            ("output_dir", str(output_dir) if output_dir else None),
            ("run_name", run_name),
            *algo_flags(algo, data, teacher, output_dir),
        ):
            if value is not None:
                flags.append((key, value))
        files = [*configs, *extra_files]
        layers = (files, [*overrides, *flags])
        args = json_object(env_args, "--env-args") if env_args is not None else None
        recipe = None
        if not no_env_recipe:
            recipe = choose_recipe(*layers, env_id=env_spec, env_args=args, console=console)
        config = build_config(
            [*([recipe] if recipe else []), *files], layers[1], env_id=env_spec, env_args=args
        )
        if algo is not None:
            check_whole_run(config)
        for warning in self_teacher_warnings(config):
            console.print(f"[yellow]warning:[/yellow] {warning}", highlight=False)
        spec = config.env.id
    except ConfigError as exc:
        raise config_exit(str(exc)) from None
    env = _load_env(spec, config.env.args)
    load_stage_env = _stage_loader(spec, config.env.args, env)
    from trainer_bridge import launch

    try:
        launch.check_env(config, env, load_stage_env)
    except ConfigError as exc:
        raise config_exit(str(exc)) from None
    if dry_run:
        digest = config.digest()
        commands = launch.host_commands(config, Path("<run dir>"))
        if output == "json":
            body = {"config_digest": digest, "recipe": str(recipe) if recipe else None}
            click.echo(json.dumps({**body, "hosts": commands}, indent=2))
        else:
            click.echo(to_toml(config))
            for host, procs in commands.items():
                click.echo(f"# {host}")
                for name, line in procs.items():
                    click.echo(f"{name}: {line}")
        return
    prepared = launch.start(config, env, spec, recipe)
    console.print(f"run dir: {prepared.run.root}")
    _finish(prepared, env, load_stage_env, push=push, public=public, output=output)


def _stage_loader(spec: str, run_args: dict[str, Any], env: Any) -> Callable[[dict[str, Any]], Any]:
    """Loads the environment with a stage's args (its data), each set of args once."""
    loaded: dict[str, Any] = {json.dumps(run_args, sort_keys=True): env}

    def load(args: dict[str, Any]) -> Any:
        key = json.dumps(args, sort_keys=True)
        if key not in loaded:
            loaded[key] = _load_env(spec, args)
        return loaded[key]

    return load


def _load_env(spec: str, args: dict[str, Any]) -> Any:
    from prime_env.errors import DatasetError, EnvironmentNotFound
    from prime_env.evaluation import EvalError, load_env

    try:
        return load_env(
            spec, args, install=partial(ensure_installed, feedback=console_feedback(console))
        )
    except (
        EnvironmentNotFound,
        EvalError,
        DatasetError,
        InstallError,
        HubError,
        cfg.ConfigError,
    ) as exc:
        raise config_exit(str(exc)) from None


def _reap_sandboxes() -> None:
    """Remove the sandboxes a killed run left (its containers die with it, but one created and
    not yet started waits for a reaper): a run starts clean, whatever its env runs code in."""
    from sandbox import SandboxError, reap_orphans

    try:
        reaped = reap_orphans()
    except SandboxError as exc:  # cleanup of someone else's leftovers never stops a run
        console.print(f"[yellow]could not remove orphaned sandboxes:[/yellow] {exc}")
        return
    if reaped:
        console.print(f"removed {reaped} sandbox(es) left by a process that is gone")


def _finish(
    prepared: Any,
    env: Any,
    load_stage_env: Callable[[dict[str, Any]], Any],
    *,
    push: bool,
    public: bool,
    output: str,
) -> None:
    from trainer_bridge import launch

    _reap_sandboxes()
    code = launch.execute(prepared, env, console, load_stage_env)
    run = prepared.run
    pushed: list[dict[str, str]] = []
    if code == 0 and push:
        pushed = _push(run, public)
    info = run.read_run_json()
    status = run.status()
    outcome = read_outcome(run.root)
    if output == "json":
        click.echo(
            json.dumps(
                {
                    "run_dir": str(run.root),
                    "status": status,
                    "error": info.get("error"),
                    "steps": prepared.config.max_steps,
                    "pushes": pushed,
                    "outcome": outcome.as_json(),
                },
                indent=2,
            )
        )
    else:
        if status == "completed":
            for line in outcome_lines(outcome, run.root):
                click.echo(line)
        click.echo(f"{status}: {run.root}")
    if code:
        sys.exit(code)


def _push(run: Any, public: bool) -> list[dict[str, str]]:
    """Upload the step-0 and final evals with `prime eval push`'s code (before/after)."""
    from prime_cli.eval.runs import push_run
    from trainer_bridge.protocol.stable import step_dir

    evals = sorted(
        int(p.name.removeprefix("step_"))
        for p in (run.root / "evals").glob("step_*")
        if (p / "metadata.json").is_file()
    )
    chosen = sorted({evals[0], evals[-1]}) if evals else []
    pushed = []
    try:
        hub = HubClient.from_settings(cfg.load_settings(), feedback=console_feedback(console))
    except cfg.ConfigError as exc:
        raise CliError(str(exc)) from exc
    with hub:
        for step in chosen:
            directory = step_dir(run.root / "evals", step)
            evaluation_id = push_run(hub, directory, public=public)
            pushed.append({"step": str(step), "evaluation_id": evaluation_id})
    run.update_run_json(pushes=pushed)
    return pushed


@train.command("resume")
@click.argument("run_dir", type=click.Path(file_okay=False, exists=True, path_type=Path))
@click.option("--max-steps", type=click.IntRange(min=1), help="train to this many steps")
@click.option(
    "--schedule",
    type=click.Choice(["extend", "restart", "constant"]),
    help="with --max-steps past the run's end on a decaying lr schedule: stretch it over all "
    "the steps (extend), or add a stage over the new steps with a fresh schedule (restart) or "
    "the configured lr held constant (constant)",
)
@click.option(
    "--no-eval",
    is_flag=True,
    help="Run no more evals (at start, every interval, at the end): e.g. after interrupting one.",
)
@click.option("--output", type=click.Choice(["table", "json"]), default="table", show_default=True)
def resume_cmd(
    run_dir: Path, max_steps: int | None, schedule: Any, no_eval: bool, output: str
) -> None:
    """Continue RUN_DIR from its newest complete checkpoint; a finished run trains further
    with --max-steps N (and --schedule when its lr schedule has decayed to 0)."""
    from trainer_bridge import launch
    from trainer_bridge.config import ConfigError
    from trainer_bridge.extend import AlreadyFinished

    def change(config: Any) -> Any:
        if max_steps:
            config = config.model_copy(update={"max_steps": max_steps})
        if no_eval:
            oc = config.orchestrator
            ev = oc.eval.model_copy(update={"at_start": False, "at_end": False, "interval": 0})
            config = config.model_copy(update={"orchestrator": oc.model_copy(update={"eval": ev})})
        return config

    try:
        prepared = launch.resume(run_dir, change, schedule)
    except AlreadyFinished as exc:
        console.print(str(exc), markup=False, highlight=False)
        if output == "json":
            body = {"run_dir": str(run_dir), "status": "completed", "error": None, "steps": None}
            click.echo(json.dumps({**body, "message": str(exc)}, indent=2))
        return
    except ConfigError as exc:
        raise config_exit(str(exc)) from None
    env = _load_env(prepared.env_spec, prepared.config.env.args)
    step = prepared.resume.step if prepared.resume else 0
    console.print(f"resuming {run_dir} ({prepared.run.status()}) at step {step}")
    loader = _stage_loader(prepared.env_spec, prepared.config.env.args, env)
    _finish(prepared, env, loader, push=False, public=False, output=output)


@train.command("plot")
@click.argument("run_dir", type=click.Path(file_okay=False, exists=True, path_type=Path))
@click.option("-o", "--out", type=Path, help="PNG path (default RUN_DIR/plots/train.png)")
def plot_cmd(run_dir: Path, out: Path | None) -> None:
    """Draw RUN_DIR's training curves (reward, eval, loss, KL, entropy, grad norm)."""
    from trainer_bridge.metrics import plot
    from trainer_bridge.orchestrator.evals import read_evals

    target = out or run_dir / "plots" / "train.png"
    try:
        plot(run_dir / "metrics.jsonl", target, read_evals(run_dir))
    except ValueError as exc:
        raise CliError(str(exc)) from None
    click.echo(str(target))


@train.command("samples")
@click.argument("run_dir", type=click.Path(file_okay=False, exists=True, path_type=Path))
@click.option("--step", type=click.IntRange(min=0), required=True, help="the step to show")
@click.option("--limit", type=click.IntRange(min=1), help="show at most this many rollouts")
@click.option("--output", type=click.Choice(["table", "json"]), default="table", show_default=True)
def samples_cmd(run_dir: Path, step: int, limit: int | None, output: str) -> None:
    """Print step N's rollouts: reward, correct or not, the advantage trained with, the text."""
    from prime_cli.train.samples import SamplesError, render, rows
    from trainer_bridge.protocol.run_dir import RunDir

    info = RunDir(run_dir).read_run_json()
    if not info:
        raise CliError(f"{run_dir} is not a prime train run directory (no run.json)")
    try:
        items = rows(run_dir, step, info.get("correctness"))
    except SamplesError as exc:
        raise CliError(str(exc)) from None
    items = items[:limit] if limit else items
    if output == "json":
        click.echo(json.dumps(items, indent=2))
    else:
        click.echo(render(items))


@train.command("export")
@click.argument("run_dir", type=click.Path(file_okay=False, exists=True, path_type=Path))
@click.option("--step", type=int, help="policy version (default: the newest)")
@click.option("--merge", is_flag=True, help="merge the LoRA adapter into the base weights")
@click.option("-o", "--out", type=Path, required=True, help="output directory (HF format)")
def export_cmd(run_dir: Path, step: int | None, merge: bool, out: Path) -> None:
    """Write a policy of RUN_DIR as a PEFT adapter, or merged into a Hugging Face model dir."""
    from trainer_bridge.config_loader import load_resolved
    from trainer_bridge.export import ExportError, export_policy

    config = load_resolved(run_dir / "config" / "resolved.toml")
    try:
        path = export_policy(run_dir, config.model, out, step=step, merge=merge)
    except ExportError as exc:
        raise CliError(str(exc)) from None
    click.echo(str(path))
