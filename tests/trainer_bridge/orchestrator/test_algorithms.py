"""The algorithms' samples, exactly, on small hand-made records: `sft` on given traces (token
rows, chats rendered by SmolLM2's real tokenizer, rollout records), `rft`'s best-of-k by the
rubric, `opd`'s per-token teacher − sampler advantages; and what is refused before any model
loads (a missing teacher, a teacher that cannot score tokens, unreadable data)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from prime_env.record import ErrorInfo, RolloutRecord, Turn
from prime_env.sft import token_sample
from tests.trainer_bridge.conftest import smollm2_tokenizer_dir  # noqa: F401
from tests.trainer_bridge.envs.vowels import load_environment
from trainer_bridge.config import ConfigError
from trainer_bridge.config_loader import build_config
from trainer_bridge.inference.teachers import Teachers
from trainer_bridge.orchestrator.algorithm_api import AlgoContext
from trainer_bridge.orchestrator.opd import OnPolicyDistillation, token_advantages
from trainer_bridge.orchestrator.stages import stage_runs
from trainer_bridge.orchestrator.traces import DataSFT, TeacherTraces, rft
from trainer_bridge.protocol.batches import TrainSample


def context(flags: list[tuple[str, Any]], tokenizer: Any = None) -> AlgoContext:
    config = build_config([], flags, env_id="vowels")
    oc = config.orchestrator
    env = load_environment(num_tasks=4)
    return AlgoContext(
        oc, {"vowels": 1.0}, env, config.model, Teachers(config.model), lambda: tokenizer
    )


def record(i: int, reward: float | None, answer: str, **kw: Any) -> RolloutRecord:
    base: dict[str, Any] = {
        "run_id": "r", "env": "vowels@0", "task_id": "t0", "example_index": 0,
        "rollout_index": i, "model": "teacher",
        "prompt": [{"role": "user", "content": "Say a word like apple."}],
        "completion": [{"role": "assistant", "content": answer}],
        "reward": reward, "rewards": {} if reward is None else {"vowels": reward},
    }  # fmt: skip
    return RolloutRecord(**{**base, **kw})


def write_jsonl(path: Path, rows: list[dict[str, Any]]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def test_sft_on_token_rows_weights_exactly_the_marked_tokens(tmp_path: Path) -> None:
    data = write_jsonl(
        tmp_path / "d.jsonl",
        [
            {"input_ids": [1, 5, 6, 7, 2], "assistant_masks": [0, 0, 1, 1, 1]},
            {"input_ids": [1, 8, 9, 2], "assistant_masks": [0, 1, 1, 0]},
            {"input_ids": [1, 4, 2], "assistant_masks": [0, 0, 1]},
        ],
    )
    algo = DataSFT(
        context([("orchestrator.algo.type", "sft"), ("orchestrator.algo.data", str(data)),
                 ("orchestrator.rollouts_per_example", 2), ("orchestrator.batch_size", 2)]),
        lambda: None,
    )  # fmt: skip
    groups = [algo.screen(f"d{i}", 0, [], order=i) for i in range(3)]
    samples = [s for g in groups for s in g.samples]
    assert [g.rollouts for g in groups] == [2, 2, 2] and all(g.dropped is None for g in groups)
    # 6 draws over 3 rows: every row twice (two passes, each a permutation)
    assert sorted(tuple(s.input_ids) for s in samples) == sorted(
        2 * [(1, 5, 6, 7, 2), (1, 8, 9, 2), (1, 4, 2)]
    )
    by_ids = {tuple(s.input_ids): s for s in samples}
    first = by_ids[(1, 5, 6, 7, 2)]
    assert first.ce_weights == [0.0, 0.0, 1.0, 1.0, 1.0]
    assert first.loss_mask == [0, 0, 1, 1, 1] and first.sampler_logprobs == [0.0] * 5
    assert first.advantage == 0.0 and first.advantages is None
    assert by_ids[(1, 8, 9, 2)].ce_weights == [0.0, 1.0, 1.0, 0.0]
    # the order is the seed's: the same order index gives the same rows
    assert [s.input_ids for s in algo.screen("again", 0, [], order=1).samples] == [
        s.input_ids for s in groups[1].samples
    ]


def test_sft_renders_chats_and_records_with_the_students_tokenizer(
    tmp_path: Path,
    smollm2_tokenizer_dir: Path,  # noqa: F811
) -> None:
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(smollm2_tokenizer_dir)
    chat = [
        {"role": "user", "content": "Say a word like apple."},
        {"role": "assistant", "content": "banana"},
    ]
    data = write_jsonl(
        tmp_path / "d.jsonl",
        [{"messages": chat, "tools": None}, json.loads(record(0, 1.0, "banana").to_json())],
    )
    flags = [
        ("orchestrator.algo.type", "sft"),
        ("orchestrator.algo.data", str(data)),
        ("orchestrator.rollouts_per_example", 2),
        ("orchestrator.batch_size", 2),
    ]
    algo = DataSFT(context(flags), lambda: tokenizer)
    group = algo.screen("d0", 0, [], order=0)
    expected = token_sample(tokenizer, chat, None)
    assert len(group.samples) == 2
    for sample in group.samples:  # the chat and the record are one transcript: one rendering
        assert sample.input_ids == expected.input_ids
        assert sample.ce_weights == [float(m) for m in expected.loss_mask]
        trained = [i for i, w in zip(sample.input_ids, sample.ce_weights) if w]
        assert tokenizer.decode(trained) == "banana" + tokenizer.eos_token


def test_rft_keeps_the_best_rollout_at_full_marks_and_drops_a_group_without_one(
    smollm2_tokenizer_dir: Path,  # noqa: F811
) -> None:
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(smollm2_tokenizer_dir)
    flags = [("orchestrator.algo.type", "rft"), ("orchestrator.algo.teacher.model", "reference")]
    algo = rft(context(flags, tokenizer))
    assert isinstance(algo, TeacherTraces)
    assert (algo.min_reward, algo.best_of) == (1.0, 1)
    records = [
        record(0, 0.5, "apple"),
        record(1, 1.0, "aaa"),  # first of the full marks: kept
        record(2, 1.0, "eee"),  # full marks too, beyond best-of-1
        record(3, None, "x", error=ErrorInfo(type="model_error", message="down")),
    ]
    group = algo.screen("g0", 3, records, order=7)
    [sample] = group.samples
    assert group.dropped is None and group.rollouts == 1 and group.version == 3
    assert sample.reward == 1.0 and sample.task_id == "t0"
    rendered = token_sample(tokenizer, [*records[1].prompt, *records[1].completion], None)
    assert sample.input_ids == rendered.input_ids
    assert sample.ce_weights == [float(m) for m in rendered.loss_mask]
    assert group.train_rewards == [0.5, 1.0, 1.0]  # the error is never a reward
    low = algo.screen("g1", 3, [record(0, 0.5, "a"), record(1, 0.75, "b")], order=8)
    assert low.samples == [] and low.dropped == "no_rollout_kept"


def test_opd_advantage_is_teacher_minus_sampler_on_sampled_tokens_only() -> None:
    sample = TrainSample(
        input_ids=[5, 6, 7, 8, 9],
        loss_mask=[0, 0, 1, 1, 0],
        sampler_logprobs=[0.0, 0.0, -1.0, -2.0, 0.0],
        advantage=0.0,
    )
    teacher = [-3.0, -0.25, -2.5, -9.0]  # of ids 6, 7, 8, 9
    assert token_advantages(sample, teacher) == [0.0, 0.0, 0.75, -0.5, 0.0]
    with pytest.raises(ValueError, match="scored 3 tokens of a 5-token sample"):
        token_advantages(sample, teacher[:3])


def test_opd_screen_turns_every_scored_rollout_into_samples_without_a_baseline() -> None:
    flags = [
        ("orchestrator.algo.type", "opd"),
        ("orchestrator.algo.teacher.model", "local/smollm2-135m"),
    ]
    algo = OnPolicyDistillation(context(flags))
    turn = Turn(
        prompt_token_ids=[1, 2], completion_token_ids=[3, 4], completion_logprobs=[-0.5, -1.5]
    )
    records = [record(0, 1.0, "a", turns=[turn]), record(1, 1.0, "a", turns=[turn])]
    group = algo.screen("g", 0, records)
    # equal rewards: GRPO would drop the group; opd trains both (its signal is the teacher's)
    assert group.dropped is None and group.rollouts == 2
    assert [s.sampler_logprobs for s in group.samples] == [[0.0, 0.0, -0.5, -1.5]] * 2


@pytest.mark.parametrize(
    ("flags", "message"),
    [
        ([("orchestrator.algo.type", "sft")], "set exactly one of algo.data"),
        ([("orchestrator.algo.type", "opd")], "needs a teacher"),
        ([("orchestrator.algo.type", "ppo")], "'ppo' is not an algorithm: use one of grpo"),
        ([("orchestrator.algo.data", "x.jsonl")], "algo.data is for algo.type = 'sft'"),
    ],
)
def test_config_refusals(flags: list[tuple[str, Any]], message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        build_config([], flags, env_id="vowels")


@pytest.mark.parametrize(
    ("teacher", "message"),
    [
        ("reference", "has no distribution over tokens"),
        ("openai/gpt-4.1-mini", "is a hosted chat API: it returns logprobs only"),
        ("local/nope", "unknown local model 'nope'"),
    ],
)
def test_opd_refuses_a_teacher_that_cannot_score_the_students_tokens(
    teacher: str, message: str
) -> None:
    config = build_config(
        [],
        [("orchestrator.algo.type", "opd"), ("orchestrator.algo.teacher.model", teacher)],
        env_id="vowels",
    )
    with pytest.raises(ConfigError, match=message):
        stage_runs(config, load_environment(num_tasks=4))


def test_a_policy_directory_teacher_must_hold_a_model(tmp_path: Path) -> None:
    config = build_config(
        [],
        [("orchestrator.algo.type", "rft"), ("orchestrator.algo.teacher.model", str(tmp_path))],
        env_id="vowels",
    )
    with pytest.raises(ConfigError, match="neither a PEFT adapter"):
        stage_runs(config, load_environment(num_tasks=4))


@pytest.mark.parametrize(
    ("line", "message"),
    [
        ("not json", "line 2 is not JSON"),
        ('{"input_ids": [1, 2], "assistant_masks": [1, 1]}', "first token has no prefix"),
        ('{"messages": [{"role": "user", "content": "hi"}]}', "no assistant turn"),
        ('{"prompt": 1}', "neither an export row"),
    ],
)
def test_bad_data_is_refused_naming_its_line(tmp_path: Path, line: str, message: str) -> None:
    data = tmp_path / "d.jsonl"
    data.write_text('{"input_ids": [1, 2], "assistant_masks": [0, 1]}\n' + line + "\n")
    config = build_config(
        [],
        [("orchestrator.algo.type", "sft"), ("orchestrator.algo.data", str(data))],
        env_id="vowels",
    )
    with pytest.raises(ConfigError, match=message):
        stage_runs(config, load_environment(num_tasks=4))
