"""Prompt optimisation, GEPA-style (Agrawal et al. 2025; verifiers' `gepa`): a reflection model
reads an environment's failed rollouts and proposes system prompts; candidates are scored on a
validation split, the Pareto-best kept, all within a rollout budget; the best prompt is then
compared with the environment's own on held-out tasks.

One step: pick a parent from the Pareto front (the candidates best on at least one validation
task, drawn by how many tasks they are best on), run it on a minibatch of training tasks, show
the reflection model the minibatch's rollouts (input, answer, expected answer, reward and its
parts) and take the new prompt it writes between ``` fences; a child that beats its parent on
that minibatch is scored on the whole validation split and joins the pool, any other is
dropped. With `proposals` above 1 the reflection model writes that many children of one
parent from the same minibatch (sampled, so they differ) and only the best of them that beats
the parent is scored on validation. `mode="append"` asks for one sentence to add to the
parent's prompt instead of a whole new prompt: an edit a small reflection model can write,
which keeps what the parent already says. Errored rollouts are infrastructure failures: they count against the budget and are
left out of every score, never read as 0. A candidate is applied as the harness's system prompt
(tasks that bring their own system message would override it, so they are refused).
"""

from __future__ import annotations

import asyncio
import copy
import json
import math
import random
import re
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from .clients.base import ModelClient, SamplingArgs
from .environment import Environment
from .errors import EvalError, ModelError
from .record import RolloutRecord
from .runner import run_rollouts
from .summary import Summary, SummaryBuilder
from .tasks import Task

REFLECTION_PROMPT = """I provided an assistant with the following instructions to perform a task for me:
```
{instruction}
```

The following are examples of different task inputs provided to the assistant along with the assistant's response for each of them, the expected answer, and the score the response got (1 is best):

{examples}

Your task is to write a new instruction for the assistant.

Read the inputs carefully and identify the input format and infer a detailed description of the task I wish to solve with the assistant. Read all the assistant responses and the scores. Identify all niche and domain-specific facts about the task and include them in the instruction, as the assistant may not have access to them. If the assistant used a generalizable strategy to solve the task, include that in the instruction as well.

Provide the new instruction within ``` blocks."""

APPEND_PROMPT = """An assistant was given this instruction:
```
{instruction}
```

Here are some of its responses, each with the expected answer and the score it got (1 is best):

{examples}

Write one short sentence to add to the instruction so that the assistant gets these right. Reply with that sentence only."""

MODES = ("rewrite", "append")
"""How a proposal is made: a whole new prompt (REFLECTION_PROMPT), or a sentence added to the
parent's (APPEND_PROMPT)."""

_FENCED = re.compile(r"```[^\n`]*\n(.*?)```", re.DOTALL)


@dataclass(frozen=True)
class OptimizeConfig:
    budget: int = 200
    """Rollouts the search may spend (validation scoring and minibatches; held-out excluded)."""
    minibatch: int = 3
    val_size: int = 8
    test_size: int = 8
    r: int = 1
    proposals: int = 1
    """Children proposed per minibatch; the best that beats its parent is kept."""
    mode: str = "rewrite"
    concurrency: int = 32
    seed: int = 0
    sampling: SamplingArgs = field(default_factory=SamplingArgs)
    reflection_sampling: SamplingArgs = field(default_factory=lambda: SamplingArgs(max_tokens=1024))


@dataclass
class Candidate:
    index: int
    prompt: str
    parent: int | None
    val_scores: list[float | None]
    """Per validation task: the mean reward of its scored rollouts (None: all errored)."""
    minibatch: dict[str, float] = field(default_factory=dict)
    """How it was admitted: its and its parent's minibatch sums."""

    @property
    def val_mean(self) -> float | None:
        scores = [s for s in self.val_scores if s is not None]
        return sum(scores) / len(scores) if scores else None


@dataclass
class Rejected:
    prompt: str
    parent: int
    minibatch: dict[str, float]


@dataclass
class OptimizeResult:
    seed_prompt: str
    best: Candidate
    candidates: list[Candidate]
    rejected: list[Rejected]
    rollouts_used: int
    before: Summary  # the environment's own prompt on the held-out tasks
    after: Summary  # the best prompt on the same tasks
    before_records: list[RolloutRecord]
    after_records: list[RolloutRecord]
    splits: dict[str, int]

    def write(self, directory: Path) -> None:
        """best_prompt.txt, candidates.jsonl (kept and rejected), held-out records, summary.json."""
        directory.mkdir(parents=True, exist_ok=True)
        (directory / "best_prompt.txt").write_text(self.best.prompt + "\n")
        with (directory / "candidates.jsonl").open("w") as fh:
            for cand in self.candidates:
                fh.write(
                    json.dumps({"kept": True, "val_mean": cand.val_mean, **asdict(cand)}) + "\n"
                )
            for rej in self.rejected:
                fh.write(json.dumps({"kept": False, **asdict(rej)}) + "\n")
        for name, records in (("before", self.before_records), ("after", self.after_records)):
            with (directory / f"heldout_{name}.jsonl").open("w") as fh:
                for record in records:
                    fh.write(record.to_json() + "\n")
        (directory / "summary.json").write_text(json.dumps(self.summary(), indent=2) + "\n")

    def summary(self) -> dict[str, Any]:
        return {
            "seed_prompt": self.seed_prompt,
            "best_prompt": self.best.prompt,
            "best_candidate": self.best.index,
            "candidates": len(self.candidates),
            "rejected": len(self.rejected),
            "rollouts_used": self.rollouts_used,
            "splits": self.splits,
            "val_mean": {"seed": self.candidates[0].val_mean, "best": self.best.val_mean},
            "heldout": {"before": self.before.model_dump(), "after": self.after.model_dump()},
        }


def with_system_prompt(env: Environment, prompt: str) -> Environment:
    """`env` whose harness prepends `prompt` as the system message (a shallow copy)."""
    variant = copy.copy(env)
    variant.harness = copy.copy(env.harness)
    variant.harness.system_prompt = prompt or None
    return variant


def splits(env: Environment, config: OptimizeConfig) -> tuple[list[Task], list[Task], list[Task]]:
    """(train, validation, held-out) tasks, disjoint: held-out from the eval split when the
    environment has one apart from its training tasks (with the rest of it behind the training
    tasks, for a training split too small to give the validation one), else carved from the
    shuffled tasks."""
    pool = list(env.tasks.shuffle(config.seed))
    if env.eval_tasks is not None:
        held = list(env.eval_tasks)
        test = held[: config.test_size]
        pool += held[config.test_size :]
    else:
        test, pool = pool[: config.test_size], pool[config.test_size :]
    val, train = pool[: config.val_size], pool[config.val_size :]
    if not val or not test:
        raise EvalError(
            f"{env.id} has too few tasks to optimise a prompt: it needs validation and held-out "
            f"tasks (--val-size {config.val_size}, --test-size {config.test_size}); lower them"
        )
    if any(t.prompt and t.prompt[0].get("role") == "system" for t in [*train, *val, *test]):
        raise EvalError(
            f"{env.id}'s tasks carry their own system message, which overrides the harness's "
            "system prompt; a prompt optimised here would never reach the model"
        )
    return train or val, val, test


def parse_instruction(reply: str) -> str | None:
    """The instruction a reflection reply proposes: its first ``` block, else the whole reply."""
    found = _FENCED.search(reply)
    text = (found.group(1) if found else reply.strip("` \n")).strip()
    return text or None


def parse_sentence(reply: str) -> str | None:
    """The sentence an append-mode reply proposes: its first non-empty line, unquoted."""
    for line in reply.splitlines():
        text = line.strip().strip("`\"' ").strip()
        if text:
            return text
    return None


def reflection_examples(records: Sequence[RolloutRecord]) -> str:
    parts = []
    for number, record in enumerate(records, start=1):
        inputs = "\n".join(
            str(m.get("content") or "") for m in record.prompt if m.get("role") != "system"
        )
        reply = "\n".join(
            str(m.get("content") or m.get("tool_calls") or "") for m in record.completion
        )
        scores = ", ".join(f"{name}: {value:g}" for name, value in record.rewards.items())
        parts.append(
            f"### Example {number}\nInput:\n{inputs}\n\nAssistant's response:\n{reply}\n\n"
            f"Expected answer: {record.answer}\nScore: {record.reward:g}"
            + (f" ({scores})" if scores else "")
        )
    return "\n\n".join(parts)


class _Search:
    def __init__(
        self,
        env: Environment,
        client: ModelClient,
        reflection: ModelClient,
        config: OptimizeConfig,
    ) -> None:
        self.env, self.client, self.reflection, self.config = env, client, reflection, config
        self.used = 0
        self.rng = random.Random(config.seed)

    async def rollouts(self, prompt: str, tasks: Sequence[Task]) -> list[RolloutRecord]:
        self.used += len(tasks) * self.config.r
        return await run_rollouts(
            with_system_prompt(self.env, prompt),
            self.client,
            tasks=list(tasks),
            r=self.config.r,
            concurrency=self.config.concurrency,
            sampling=self.config.sampling,
        )

    async def task_scores(self, prompt: str, tasks: Sequence[Task]) -> list[float | None]:
        records = await self.rollouts(prompt, tasks)
        per_task: list[list[float]] = [[] for _ in tasks]
        for record in records:
            if record.reward is not None:
                per_task[record.example_index].append(record.reward)
        return [sum(s) / len(s) if s else None for s in per_task]

    def parent(self, pool: list[Candidate]) -> Candidate:
        """A Pareto-front candidate, drawn by how many validation tasks it is best on."""
        wins = [0] * len(pool)
        for task in range(len(pool[0].val_scores)):
            scores = [c.val_scores[task] for c in pool]
            known = [s for s in scores if s is not None]
            if not known:
                continue
            best = max(known)
            for index, score in enumerate(scores):
                if score is not None and math.isclose(score, best):
                    wins[index] += 1
        if not any(wins):
            return pool[0]
        return self.rng.choices(pool, weights=wins)[0]

    async def propose(self, parent: Candidate, records: list[RolloutRecord]) -> list[str]:
        """`config.proposals` new prompts from `parent` and its minibatch, distinct, new to
        the pool's prompts."""
        meta = APPEND_PROMPT if self.config.mode == "append" else REFLECTION_PROMPT
        prompt = meta.format(instruction=parent.prompt, examples=reflection_examples(records))
        try:
            replies = await asyncio.gather(
                *(
                    self.reflection.chat(
                        [{"role": "user", "content": prompt}],
                        sampling=self.config.reflection_sampling,
                    )
                    for _ in range(self.config.proposals)
                )
            )
        except ModelError as exc:
            raise EvalError(f"the reflection model failed: {exc}") from exc
        found: list[str] = []
        for reply in replies:
            text = str(reply.message.get("content") or "")
            if self.config.mode == "append":
                sentence = parse_sentence(text)
                proposal = f"{parent.prompt} {sentence}".strip() if sentence else None
            else:
                proposal = parse_instruction(text)
            if proposal is not None and proposal not in found:
                found.append(proposal)
        return found


async def optimize_prompt(
    env: Environment,
    client: ModelClient,
    reflection: ModelClient,
    config: OptimizeConfig,
    on_event: Callable[[str], None] = lambda _: None,
) -> OptimizeResult:
    """Search system prompts for `env` with `client`; see the module docstring."""
    train, val, test = splits(env, config)
    search = _Search(env, client, reflection, config)
    seed_prompt = env.harness.system_prompt or ""
    if len(val) * config.r > config.budget:
        raise EvalError(
            f"--budget {config.budget} cannot score even the starting prompt on {len(val)} "
            f"validation tasks × {config.r}; raise it or lower --val-size"
        )
    pool = [Candidate(0, seed_prompt, None, await search.task_scores(seed_prompt, val))]
    rejected: list[Rejected] = []
    on_event(f"candidate 0 (the environment's prompt): validation {_fmt(pool[0].val_mean)}")
    step_cost = (1 + config.proposals) * config.minibatch * config.r
    offset = 0
    while search.used + step_cost + len(val) * config.r <= config.budget:
        parent = search.parent(pool)
        batch = [train[(offset + i) % len(train)] for i in range(config.minibatch)]
        offset += config.minibatch
        records = await search.rollouts(parent.prompt, batch)
        scored = [rec for rec in records if rec.reward is not None]
        if scored and all(rec.reward is not None and rec.reward >= 1.0 for rec in scored):
            continue  # nothing failed: nothing to learn from this minibatch
        if not scored:
            on_event(f"minibatch of candidate {parent.index}: every rollout errored; skipped")
            continue
        known = {c.prompt for c in pool}
        proposals = [p for p in await search.propose(parent, scored) if p not in known]
        if not proposals:
            continue
        before = sum(rec.reward or 0.0 for rec in scored)
        children = [await _minibatch_sum(search, proposal, batch) for proposal in proposals]
        winner = max(range(len(proposals)), key=lambda i: (children[i], -i))
        for index, (proposal, after) in enumerate(zip(proposals, children)):
            if index == winner and after > before:
                continue
            rejected.append(Rejected(proposal, parent.index, {"parent": before, "child": after}))
            on_event(f"proposal from {parent.index}: minibatch {before:g} -> {after:g}; dropped")
        after = children[winner]
        if after <= before:
            continue
        minibatch = {"parent": before, "child": after}
        candidate = Candidate(
            len(pool),
            proposals[winner],
            parent.index,
            await search.task_scores(proposals[winner], val),
            minibatch,
        )
        pool.append(candidate)
        on_event(
            f"candidate {candidate.index} (from {parent.index}): minibatch {before:g} -> "
            f"{after:g}; validation {_fmt(candidate.val_mean)}"
        )
    best = max(pool, key=lambda c: (c.val_mean if c.val_mean is not None else -math.inf, -c.index))
    before_records = await _heldout(env, client, seed_prompt, test, config)
    after_records = (
        before_records
        if best.index == 0
        else await _heldout(env, client, best.prompt, test, config)
    )
    return OptimizeResult(
        seed_prompt,
        best,
        pool,
        rejected,
        search.used,
        _summary(before_records),
        _summary(after_records),
        before_records,
        after_records,
        {"train": len(train), "validation": len(val), "heldout": len(test)},
    )


async def _minibatch_sum(search: _Search, prompt: str, batch: list[Task]) -> float:
    """The summed reward of `prompt`'s scored rollouts on `batch` (errored ones left out)."""
    records = await search.rollouts(prompt, batch)
    return sum(rec.reward for rec in records if rec.reward is not None)


async def _heldout(
    env: Environment, client: ModelClient, prompt: str, tasks: list[Task], config: OptimizeConfig
) -> list[RolloutRecord]:
    return await run_rollouts(
        with_system_prompt(env, prompt),
        client,
        tasks=tasks,
        r=config.r,
        concurrency=config.concurrency,
        sampling=config.sampling,
    )


def _summary(records: Sequence[RolloutRecord]) -> Summary:
    builder = SummaryBuilder()
    for record in records:
        builder.add(record)
    return builder.summary()


def _fmt(value: float | None) -> str:
    return "-" if value is None else f"{value:.3f}"
