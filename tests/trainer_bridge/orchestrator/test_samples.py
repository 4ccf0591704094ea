"""Records → token-exact samples: merging turns, splitting where the template re-rendered,
masks on sampled tokens only, missing ids, and the batch files."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from prime_env.record import RolloutRecord, Trace, TraceCall, Turn
from trainer_bridge.orchestrator.samples import SampleError, samples_from_record
from trainer_bridge.protocol.batches import TrainSample, batch_ready, read_batch, write_batch


def record(turns: list[Turn] | None, **kw) -> RolloutRecord:
    base = {
        "run_id": "r",
        "env": "o/e@1",
        "task_id": "t1",
        "example_index": 0,
        "rollout_index": 3,
        "model": "m",
        "prompt": [],
        "reward": 1.0,
        "stop_reason": "completed",
        "turns": turns,
    }
    return RolloutRecord(**{**base, **kw})


def turn(prompt, completion, version=None) -> Turn:
    return Turn(
        prompt_token_ids=prompt,
        completion_token_ids=completion,
        completion_logprobs=[-(i + 1) / 8 for i in range(len(completion))],
        policy_version=version,
    )


def test_turns_that_extend_exactly_merge_into_one_sequence() -> None:
    turns = [turn([1, 2, 3], [10, 11, 2], 4), turn([1, 2, 3, 10, 11, 2, 7, 8], [12, 2], 5)]
    [s] = samples_from_record(record(turns), advantage=0.5, temperature=0.7, group="0:t1")
    assert s.input_ids == [1, 2, 3, 10, 11, 2, 7, 8, 12, 2]
    assert s.loss_mask == [0, 0, 0, 1, 1, 1, 0, 0, 1, 1]
    assert s.sampler_logprobs == [0, 0, 0, -0.125, -0.25, -0.375, 0, 0, -0.125, -0.25]
    assert s.policy_version == 4 and s.advantage == 0.5 and s.temperature == 0.7
    assert s.num_loss_tokens == 5  # Σ mask = Σ sampled tokens


def test_a_turn_whose_retokenisation_differs_starts_a_new_sample() -> None:
    # The model sampled [10, 11] ("a" + "b"); the template re-rendered it as one token [99].
    turns = [
        turn([1, 2], [10, 11, 2], 1),
        turn([1, 2, 99, 2, 7], [12, 2], 2),
        turn([1, 2, 99, 2, 7, 12, 2, 8], [13], 2),  # extends the second turn: merges with it
    ]
    first, second = samples_from_record(
        record(turns, stop_reason="length"), advantage=-1.0, group="g"
    )
    assert first.input_ids == [1, 2, 10, 11, 2] and first.loss_mask == [0, 0, 1, 1, 1]
    assert second.input_ids == [1, 2, 99, 2, 7, 12, 2, 8, 13]
    assert second.loss_mask == [0, 0, 0, 0, 0, 1, 1, 0, 1]
    assert (first.policy_version, second.policy_version) == (1, 2)
    # only the sample holding the cut-off last turn is truncated
    assert (first.truncated, second.truncated) == (False, True)
    assert sum(s.num_loss_tokens for s in (first, second)) == 3 + 2 + 1


def test_a_trace_graph_gives_one_sample_per_branch() -> None:
    """Main agent, its subagent, the main agent again: the main agent's turns are one branch
    (its second prompt extends its first call's ids), the subagent's another; without the
    trace the interleaving would split the main agent into two samples."""
    turns = [
        turn([1, 2], [10, 2], 1),
        turn([5, 6], [20, 21, 2], 1),
        turn([1, 2, 10, 2, 7], [11, 2], 2),
    ]
    trace = Trace(
        parents=[None, 0, 1, None, 3, 4, 2, 6],
        calls=[
            TraceCall(request=0, reply=2, parent=None),
            TraceCall(request=4, reply=5, parent=None),
            TraceCall(request=6, reply=7, parent=0),
        ],
    )
    sub, main = samples_from_record(record(turns, trace=trace), advantage=1.0)
    assert main.input_ids == [1, 2, 10, 2, 7, 11, 2]
    assert main.loss_mask == [0, 0, 1, 1, 0, 1, 1]
    assert sub.input_ids == [5, 6, 20, 21, 2] and sub.loss_mask == [0, 0, 1, 1, 1]
    assert (main.policy_version, sub.policy_version) == (1, 1)
    assert sum(s.num_loss_tokens for s in (main, sub)) == 2 + 3 + 2
    assert len(samples_from_record(record(turns), advantage=1.0)) == 3
    # a parent whose ids the turn does not extend: the turn starts a branch of its own
    broken = [*turns[:2], turn([1, 2, 99, 7], [11, 2], 2)]
    assert len(samples_from_record(record(broken, trace=trace), advantage=1.0)) == 3
    with pytest.raises(SampleError, match="trace_mismatch"):
        samples_from_record(record(turns[:2], trace=trace), advantage=1.0)


def test_missing_ids_are_an_error_never_retokenised() -> None:
    with pytest.raises(SampleError) as info:
        samples_from_record(record(None), advantage=1.0)
    assert info.value.error_type == "missing_token_ids"
    partial = [turn([1], [2]), Turn(prompt_token_ids=[1, 2], completion_token_ids=None)]
    with pytest.raises(SampleError, match="missing_token_ids"):
        samples_from_record(record(partial), advantage=1.0)
    bad = [Turn(prompt_token_ids=[1], completion_token_ids=[2, 3], completion_logprobs=[-1.0])]
    with pytest.raises(SampleError, match="token_logprob_mismatch"):
        samples_from_record(record(bad), advantage=1.0)
    errored = record([turn([1], [2])], reward=None, error={"type": "timeout", "message": "x"})
    with pytest.raises(SampleError, match="errored_rollout"):
        samples_from_record(errored, advantage=1.0)


def test_sample_validation() -> None:
    with pytest.raises(ValueError, match="one entry per token"):
        TrainSample(input_ids=[1, 2], loss_mask=[0], sampler_logprobs=[0, 0], advantage=1)
    with pytest.raises(ValueError, match="first token"):
        TrainSample(input_ids=[1], loss_mask=[1], sampler_logprobs=[0], advantage=1)


def test_batch_round_trip_is_atomic(tmp_path: Path) -> None:
    samples = samples_from_record(record([turn([1, 2], [3, 2])]), advantage=1.0, group="g")
    assert not batch_ready(tmp_path, 0)
    path = write_batch(tmp_path, 0, samples * 3, {"policy_versions": [0]})
    assert batch_ready(tmp_path, 0) and (path / "STABLE").is_file()
    batch = read_batch(tmp_path, 0)
    assert batch.samples == samples * 3
    assert batch.meta == {"policy_versions": [0], "step": 0, "num_samples": 3}
    with pytest.raises(FileExistsError):
        write_batch(tmp_path, 0, samples)
    # a writer that fails leaves nothing behind that looks like a batch
    with pytest.raises(AttributeError):
        write_batch(tmp_path, 1, [object()])  # type: ignore[list-item]
    assert not (tmp_path / "batches" / "step_1").exists()
    assert [p.name for p in (tmp_path / "batches").iterdir()] == ["step_0"]
    # an empty batch is a step without an update: written and read like any other
    write_batch(tmp_path, 3, [], {"stage": 0})
    assert read_batch(tmp_path, 3).samples == []
    # an unstable directory (crash between rename and marker) is not read
    (tmp_path / "batches" / "step_2").mkdir()
    (tmp_path / "batches" / "step_2" / "samples.jsonl").write_text(json.dumps({}))
    with pytest.raises(FileNotFoundError, match="STABLE"):
        read_batch(tmp_path, 2)
    write_batch(tmp_path, 2, samples)
    assert read_batch(tmp_path, 2).samples == samples
