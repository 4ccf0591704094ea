"""Rollout records → token-exact training samples (protocol/batches.py carries them to the trainer).

Every id and logprob comes from the backend that sampled it (`RolloutRecord.turns`); text is
never re-tokenised, because a chat template re-rendering a transcript need not reproduce the
ids the model sampled (trl#5224, prime-rl#1334). Each turn continues a parent: the one its
record's trace graph names (an agent program's subagents and edited histories), else the
turn before it; it stays on its parent's branch only while its prompt extends the parent's
prompt + completion exactly (`prime_env.trace_graph.extends`), and starts a branch where it
does not (the template re-rendered a reply differently, a stop string cut it). Each
root-to-leaf branch is one sample.

The loss mask is 1 exactly on sampled tokens (EOS included) and 0 on prompt, tool, env,
simulated-user and template tokens, so Σ mask = Σ completion tokens of the record.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from prime_env.record import RolloutRecord, Turn
from prime_env.trace_graph import extends
from trainer_bridge.protocol.batches import TrainSample

TRUNCATED_STOPS = frozenset({"length", "token_budget"})
"""Stop reasons meaning the last model turn was cut off by a token limit."""


class SampleError(Exception):
    """A record that cannot become a training sample; `error_type` is counted by the caller."""

    def __init__(self, error_type: str, message: str) -> None:
        super().__init__(f"{error_type}: {message}")
        self.error_type = error_type


@dataclass
class _Building:
    ids: list[int] = field(default_factory=list)
    mask: list[int] = field(default_factory=list)
    logprobs: list[float] = field(default_factory=list)
    versions: list[int] = field(default_factory=list)

    def add(self, ids: Sequence[int], sampled: bool, logprobs: Sequence[float] = ()) -> None:
        self.ids.extend(ids)
        self.mask.extend([1 if sampled else 0] * len(ids))
        self.logprobs.extend(logprobs if sampled else [0.0] * len(ids))


def _checked_turns(record: RolloutRecord) -> list[Turn]:
    turns = record.turns or []
    where = f"{record.task_id} rollout {record.rollout_index}"
    if not turns:
        raise SampleError(
            "missing_token_ids",
            f"{where} has no token ids: the model server must return them "
            "(vLLM: --return-tokens-as-token-ids; the torch backend always does)",
        )
    for i, turn in enumerate(turns):
        if (
            turn.prompt_token_ids is None
            or turn.completion_token_ids is None
            or turn.completion_logprobs is None
        ):
            raise SampleError(
                "missing_token_ids",
                f"{where} turn {i} lacks prompt ids, completion ids or logprobs; "
                "text is never re-tokenised",
            )
        if len(turn.completion_logprobs) != len(turn.completion_token_ids):
            raise SampleError(
                "token_logprob_mismatch",
                f"{where} turn {i}: {len(turn.completion_token_ids)} completion ids but "
                f"{len(turn.completion_logprobs)} logprobs",
            )
    return turns


def _token_parents(record: RolloutRecord, turns: list[Turn]) -> list[int | None]:
    """Each turn's parent on its branch: the trace's (else the previous turn), kept only where
    the turn's prompt extends the parent's prompt + completion token for token."""
    if record.trace is not None and len(record.trace.calls) != len(turns):
        raise SampleError(
            "trace_mismatch",
            f"{record.task_id} rollout {record.rollout_index}: {len(record.trace.calls)} calls "
            f"in its trace but {len(turns)} turns",
        )
    parents: list[int | None] = []
    for i, turn in enumerate(turns):
        parent = (
            record.trace.calls[i].parent if record.trace is not None else (i - 1 if i else None)
        )
        if parent is not None and not (
            parent < i
            and extends(
                turn.prompt_token_ids,
                turns[parent].prompt_token_ids,
                turns[parent].completion_token_ids,
            )
        ):
            parent = None
        parents.append(parent)
    return parents


def samples_from_record(
    record: RolloutRecord,
    *,
    advantage: float,
    temperature: float = 1.0,
    group: str = "",
) -> list[TrainSample]:
    """The training samples of one scored rollout (raise SampleError if it has no ids)."""
    if record.error is not None or record.reward is None:
        raise SampleError("errored_rollout", f"{record.task_id}: error records are never trained")
    turns = _checked_turns(record)
    parents = _token_parents(record, turns)
    has_child = {p for p in parents if p is not None}
    pieces: list[_Building] = []
    last_branch = 0
    for leaf in (i for i in range(len(turns)) if i not in has_child):
        path = [leaf]
        while (parent := parents[path[-1]]) is not None:
            path.append(parent)
        piece = _Building()
        for i in reversed(path):
            turn = turns[i]
            prompt = list(turn.prompt_token_ids or [])
            piece.add(prompt[len(piece.ids) :], sampled=False)
            piece.add(turn.completion_token_ids or [], True, turn.completion_logprobs or [])
            version = (
                turn.policy_version if turn.policy_version is not None else record.policy_version
            )
            if version is not None:
                piece.versions.append(version)
        if len(turns) - 1 in path:
            last_branch = len(pieces)
        pieces.append(piece)
    truncated = record.stop_reason in TRUNCATED_STOPS
    return [
        TrainSample(
            input_ids=piece.ids,
            loss_mask=piece.mask,
            sampler_logprobs=piece.logprobs,
            advantage=advantage,
            temperature=temperature,
            truncated=truncated and i == last_branch,
            policy_version=min(piece.versions) if piece.versions else None,
            group=group,
            task_id=record.task_id,
            rollout_index=record.rollout_index,
            reward=record.reward,
        )
        for i, piece in enumerate(pieces)
    ]
