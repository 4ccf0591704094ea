"""`sft` and `rft`: cross-entropy on traces, given (`algo.data`) or a teacher's (`algo.teacher`).

A trace (each conversation of a record: prime_env.sft.conversations) becomes a sample as
`prime eval export --tokens` writes one (prime_env.sft.token_sample:
the chat rendered by the student's tokenizer as `local/` models render prompts, each assistant
turn's tokens through its end-of-turn token trained), with `ce_weights` 1.0 on those tokens:
the trainer's `ce` part, never the policy gradient.
- `sft` with `algo.data`: a JSONL file of `prime eval export` rows (chats, or token ids with
  `assistant_masks`) or rollout records (`results.jsonl`), read once, checked line by line
  before anything loads, and cycled in a seeded order, `rollouts_per_example` traces a group;
- `sft` with a teacher: the teacher's rollouts of each task, every distinct scored one
  (at least `algo.min_reward` when set);
- `rft`: the same, filtered by the environment's own rubric: the `algo.best_of` (1) highest
  rewards of each group at or above `algo.min_reward` (1.0), de-duplicated
  (prime_env.sft.select_records, the rule `prime eval export` applies).
"""

from __future__ import annotations

import json
import random
from collections.abc import Callable
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from prime_env.record import RolloutRecord
from prime_env.sft import (
    RenderError,
    TokenSample,
    chat_messages,
    conversations,
    select_records,
    token_sample,
)
from trainer_bridge.config import ConfigError, TeacherConfig
from trainer_bridge.inference.teachers import Teachers, check_teacher
from trainer_bridge.orchestrator.algorithm_api import AlgoContext, GroupRequest, sample_group
from trainer_bridge.orchestrator.groups import Group
from trainer_bridge.orchestrator.rewards import training_reward
from trainer_bridge.protocol.batches import TrainSample

RFT_MIN_REWARD = 1.0
RFT_BEST_OF = 1

Tokenizer = Callable[[], Any]


def trace_sample(trace: TokenSample, *, key: str, task_id: str, index: int) -> TrainSample:
    """A trace as a `ce` sample: every token its mask marks has weight 1."""
    n = len(trace.input_ids)
    return TrainSample(
        input_ids=trace.input_ids,
        loss_mask=trace.loss_mask,
        sampler_logprobs=[0.0] * n,
        advantage=0.0,
        ce_weights=[float(m) for m in trace.loss_mask],
        group=key,
        task_id=task_id,
        rollout_index=index,
    )


def record_traces(tokenizer: Any, record: RolloutRecord) -> list[TokenSample]:
    """A rollout's conversations (one, or one per branch of its trace graph: a subagent's chat
    is never mixed into its caller's) rendered by the student's tokenizer."""
    return [
        token_sample(tokenizer, chat_messages(conversation), record.tools)
        for conversation in conversations(record)
    ]


@dataclass(frozen=True)
class DataRow:
    """One line of an SFT data file, as read: a record, a chat, or token ids with a mask."""

    line: int
    record: RolloutRecord | None = None
    chat: dict[str, Any] | None = None
    tokens: TokenSample | None = None

    def traces(self, tokenizer: Any) -> list[TokenSample]:
        if self.tokens is not None:
            return [self.tokens]
        if self.record is not None:
            return record_traces(tokenizer, self.record)
        assert self.chat is not None
        tools = self.chat.get("tools")
        schemas = json.loads(tools) if isinstance(tools, str) else tools
        return [token_sample(tokenizer, self.chat["messages"], schemas or None)]


def read_data(path: Path) -> list[DataRow]:
    """The rows of an SFT data file; ConfigError naming the line that is not one."""
    try:
        lines = path.read_text().splitlines()
    except OSError as exc:
        raise ConfigError(
            f"algo.data {path}: cannot read it ({exc.strerror}); give a JSONL file written by "
            "`prime eval export --format sft`, a run directory or a run id (prime train --data)"
        ) from None
    rows: list[DataRow] = []
    for number, text in enumerate(lines, 1):
        if text.strip():
            rows.append(_row(path, number, text))
    if not rows:
        raise ConfigError(f"algo.data {path} has no rows: nothing to train on")
    return rows


def _row(path: Path, number: int, text: str) -> DataRow:
    where = f"algo.data {path} line {number}"
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ConfigError(f"{where} is not JSON ({exc.msg})") from None
    if not isinstance(data, dict):
        raise ConfigError(f"{where} is not a JSON object")
    if "input_ids" in data:
        ids, mask = data["input_ids"], data.get("assistant_masks")
        if not isinstance(mask, list) or len(mask) != len(ids) or not any(mask):
            raise ConfigError(f"{where}: assistant_masks must mark the trained tokens of input_ids")
        if mask[0]:
            raise ConfigError(f"{where}: the first token has no prefix and cannot be trained")
        return DataRow(number, tokens=TokenSample([int(i) for i in ids], [int(m) for m in mask]))
    if "messages" in data and "completion" not in data:
        if not any(m.get("role") == "assistant" for m in data["messages"]):
            raise ConfigError(f"{where}: the chat has no assistant turn to learn")
        return DataRow(number, chat=data)
    try:
        record = RolloutRecord.model_validate(data)
    except ValidationError as exc:
        raise ConfigError(
            f"{where} is neither an export row (messages, or input_ids + assistant_masks) nor "
            f"a rollout record: {exc.errors()[0]['msg']}"
        ) from None
    if record.error is not None:
        raise ConfigError(f"{where} is an error record: export the run, which leaves them out")
    return DataRow(number, record=record)


class DataSFT:
    """`sft` on `algo.data`: each group is the next `rollouts_per_example` rows of a seeded
    order (reshuffled every pass over the data), by the group's place in the task order."""

    def __init__(self, context: AlgoContext, tokenizer: Tokenizer) -> None:
        assert context.config.algo.data is not None
        self.rows = read_data(Path(context.config.algo.data))
        self.size = context.config.rollouts_per_example
        self.seed = context.config.seed
        self.tokenizer = tokenizer

    def _rows(self, order: int) -> list[DataRow]:
        out = []
        for position in range(order * self.size, (order + 1) * self.size):
            epoch, at = divmod(position, len(self.rows))
            out.append(self.rows[_permutation(self.seed, epoch, len(self.rows))[at]])
        return out

    def screen(self, key: str, version: int, records: list[RolloutRecord], order: int = 0) -> Group:
        group = Group(key, version, [], order)
        group.version = version
        for index, row in enumerate(self._rows(order)):
            try:
                traces = row.traces(self.tokenizer())
            except (RenderError, KeyError, TypeError, ValueError):
                group.sample_errors["render_error"] += 1
                continue
            group.samples += [
                trace_sample(trace, key=key, task_id=f"data:{row.line}", index=index)
                for trace in traces
            ]
            group.rollouts += 1
        if not group.samples:
            group.dropped = "render_error"
        return group

    async def make_group(self, request: GroupRequest) -> Group:
        return self.screen(request.key, request.version, [], request.order)


@cache
def _permutation(seed: int, epoch: int, n: int) -> tuple[int, ...]:
    order = list(range(n))
    random.Random(seed * 1_000_003 + epoch).shuffle(order)
    return tuple(order)


class TeacherTraces:
    """`sft` or `rft` on a teacher's rollouts of each task, kept by the environment's rubric."""

    def __init__(
        self,
        context: AlgoContext,
        teacher: TeacherConfig,
        tokenizer: Tokenizer,
        *,
        min_reward: float | None,
        best_of: int | None,
    ) -> None:
        check_teacher(teacher, logprobs=False)
        self.context = context
        self.teacher = teacher
        self.teachers: Teachers = context.teachers
        self.tokenizer = tokenizer
        self.min_reward = min_reward
        self.best_of = best_of

    def screen(self, key: str, version: int, records: list[RolloutRecord], order: int = 0) -> Group:
        for record in records:
            record.policy_version = version
        group = Group(key, version, records, order)
        group.version = version
        weights = self.context.weights
        group.train_rewards = [training_reward(r, weights) for r in records if r.error is None]
        selection = select_records(records, min_reward=self.min_reward, best_of=self.best_of)
        for index, record in enumerate(selection.kept):
            try:
                traces = record_traces(self.tokenizer(), record)
            except RenderError:
                group.sample_errors["render_error"] += 1
                continue
            for trace in traces:
                sample = trace_sample(trace, key=key, task_id=record.task_id, index=index)
                group.samples.append(sample.model_copy(update={"reward": record.reward}))
            group.rollouts += 1
        if not group.samples:
            group.dropped = "no_rollout_kept" if not group.sample_errors else "render_error"
        return group

    async def make_group(self, request: GroupRequest) -> Group:
        client = self.teachers.client(self.teacher, self.context.env)
        records = await sample_group(self.context.env, client, request)
        return self.screen(request.key, request.version, records, request.order)


def sft(context: AlgoContext) -> DataSFT | TeacherTraces:
    algo = context.config.algo
    if algo.data is not None:
        return DataSFT(context, context.tokenizer)
    assert algo.teacher is not None
    return TeacherTraces(
        context, algo.teacher, context.tokenizer, min_reward=algo.min_reward, best_of=algo.best_of
    )


def rft(context: AlgoContext) -> TeacherTraces:
    algo = context.config.algo
    assert algo.teacher is not None
    return TeacherTraces(
        context,
        algo.teacher,
        context.tokenizer,
        min_reward=RFT_MIN_REWARD if algo.min_reward is None else algo.min_reward,
        best_of=algo.best_of or RFT_BEST_OF,
    )
