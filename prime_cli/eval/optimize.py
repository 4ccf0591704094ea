"""`prime eval optimize ENV -m MODEL [--reflection-model M]`: GEPA-style search for ENV's system
prompt (`prime_env.prompt_optimizer` does the work; this is the shell: models, budget, the
before/after table and where the result is written)."""

from __future__ import annotations

import json
import uuid
from functools import partial
from typing import Any

import click
from rich.table import Table

from hub_client.install import ensure_installed
from prime_cli.errors import CliError
from prime_cli.eval.local_cap import cap_local_tokens
from prime_cli.eval.options import CALLS, EvalOptions, eval_options
from prime_cli.eval.tables import fmt
from prime_cli.feedback import console_feedback
from prime_cli.messages import output_console, say
from prime_cli.options import output_option
from prime_cli.program_host import program_on_host_option
from prime_env.clients.base import SamplingArgs
from prime_env.clients.model_specs import REFERENCE_MODEL, default_model, resolve_model
from prime_env.eval_run_dir import run_name
from prime_env.evaluation import load_env, normalize_sampling, sampling_from_json
from prime_env.process import event_loop
from prime_env.prompt_optimizer import MODES, OptimizeConfig, OptimizeResult, optimize_prompt
from prime_env.summary import Summary

console = output_console()
err_console = output_console(stderr=True)


@click.command("optimize")
@click.argument("env_spec", metavar="ENV")
@eval_options(
    "models", "base_url", "api", "api_key_var",
    models={"help": "the model whose prompt is optimised (one -m, as prime eval run's)"},
    base_url={"help": "a server to send -m to"},
    api={"help": "the API the server at -b speaks"},
    api_key_var={"help": "environment variable holding -m's key"},
)  # fmt: skip
@click.option(
    "--reflection-model",
    help="the model that reads failures and writes prompts (default: -m's own model)",
)
@click.option(
    "--reflection-base-url", help="a server to send --reflection-model to (default: -m's)"
)
@click.option(
    "--reflection-max-tokens", type=click.IntRange(min=1), default=1024, show_default=True
)
@click.option(
    "--reflection-temperature",
    type=click.FloatRange(min=0),
    help="sampling temperature of the reflection model (default: its own)",
)
@click.option(
    "--proposals",
    type=click.IntRange(min=1),
    default=1,
    show_default=True,
    help="prompts proposed per minibatch; the best that beats its parent is kept",
)
@click.option(
    "--mode",
    type=click.Choice(MODES),
    default="rewrite",
    show_default=True,
    help="rewrite: the reflection model writes a whole prompt; append: one sentence added",
)
@click.option(
    "--budget",
    type=click.IntRange(min=1),
    default=200,
    show_default=True,
    help="rollouts the search may spend (held-out evaluation not included)",
)
@click.option("--minibatch", type=click.IntRange(min=1), default=3, show_default=True)
@click.option("--val-size", type=click.IntRange(min=1), default=8, show_default=True)
@click.option("--test-size", type=click.IntRange(min=1), default=8, show_default=True)
@eval_options(
    "r", "concurrency", "env_args", "max_tokens", "temperature",
    r={"default": 1}, concurrency={"help": "rollouts in flight"},
)  # fmt: skip
@click.option("--seed", type=int, default=0, show_default=True)
@eval_options(*CALLS, "output_dir")
@output_option
@program_on_host_option
def optimize_cmd(
    env_spec: str,
    reflection_model: str | None,
    reflection_base_url: str | None,
    reflection_max_tokens: int,
    reflection_temperature: float | None,
    proposals: int,
    mode: str,
    budget: int,
    minibatch: int,
    val_size: int,
    test_size: int,
    seed: int,
    output: str,
    **flags: Any,
) -> None:
    """Search ENV's system prompt for MODEL: a reflection model reads failed rollouts and
    proposes prompts, scored on a validation split within --budget rollouts; the best is
    compared with ENV's own prompt on held-out tasks."""
    opts = EvalOptions(**flags)
    if len(opts.models) > 1:
        raise click.UsageError("optimize searches the prompt of one model: give one -m")
    spec = resolve_model(
        opts.models[0] if opts.models else default_model(),
        base_url=opts.base_url,
        api=opts.api,
        api_key_var=opts.api_key_var,
    )
    if reflection_model is None and reflection_base_url is None:
        reflector = spec  # the run's own model reflects (GEPA's default is a stronger one)
        say(err_console, f"reflecting with {spec.name}, the model optimised (--reflection-model M "
            "to choose another)")  # fmt: skip
    else:
        reflector = resolve_model(reflection_model or spec.name, base_url=reflection_base_url)
    if REFERENCE_MODEL in (spec.client, reflector.client):
        raise CliError(
            "-m reference plays the environment's own policy, which reads no system prompt: "
            "optimise the prompt of a model (-m provider/model, -m DIR) with a model reflecting"
        )
    for each in (spec, reflector):
        each.api_key()  # a missing key fails here, before anything runs
    sampling = opts.sampling()
    cap_local_tokens([spec], sampling, err_console)
    env = load_env(
        env_spec,
        opts.env_arguments(),
        install=partial(ensure_installed, feedback=console_feedback(err_console)),
    )
    config = OptimizeConfig(
        budget=budget,
        minibatch=minibatch,
        val_size=val_size,
        test_size=test_size,
        r=opts.r,
        proposals=proposals,
        mode=mode,
        concurrency=opts.concurrency,
        seed=seed,
        sampling=sampling_from_json(normalize_sampling(sampling)),
        # no seed: the proposals of one minibatch are sampled together and must differ
        reflection_sampling=SamplingArgs(
            max_tokens=reflection_max_tokens, temperature=reflection_temperature
        ),
    )
    policy = opts.retry_policy()
    client = spec.create_client(policy=policy)
    # one in-process model serves both roles rather than being loaded twice
    reflection = client if reflector == spec else reflector.create_client(policy=policy)

    async def search() -> OptimizeResult:
        try:
            return await optimize_prompt(
                env, client, reflection, config, on_event=lambda line: say(err_console, line)
            )
        finally:
            await client.aclose()
            if reflection is not client:
                await reflection.aclose()

    result = event_loop.run(search())
    directory = opts.output_dir / "optimize" / run_name(env.name, spec.name) / uuid.uuid4().hex[:8]
    result.write(directory)
    if output == "json":
        click.echo(json.dumps({"directory": str(directory), **result.summary()}, indent=2))
        return
    console.print(_table(env.id, spec.name, result))
    say(console, f"best prompt (candidate {result.best.index} of {len(result.candidates)}):")
    console.print(result.best.prompt, soft_wrap=True, markup=False, highlight=False)
    say(console, f"written to {directory} ({result.rollouts_used} rollouts of {budget} spent)")


def _table(env_id: str, model: str, result: OptimizeResult) -> Table:
    table = Table(title=f"{env_id} with {model}: held-out tasks ({result.splits['heldout']})")
    for column in ("prompt", "held-out reward (mean ± se)", "validation", "errors"):
        table.add_column(column, no_wrap=True)
    rows: list[tuple[str, Summary, float | None]] = [
        ("the environment's", result.before, result.candidates[0].val_mean),
        (f"optimised (candidate {result.best.index})", result.after, result.best.val_mean),
    ]
    for label, summary, val in rows:
        table.add_row(
            label,
            f"{fmt(summary.reward_mean)} ± {fmt(summary.reward_stderr)}",
            fmt(val),
            str(summary.errors),
        )
    return table
