"""TaskSet loaders and deterministic views."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest

from prime_env import DatasetError, Task, TaskSet
from tests.support import python_output, require

RECORDS = [
    {"question": "2+2?", "answer": "4", "difficulty": "easy"},
    {
        "prompt": [{"role": "system", "content": "s"}, {"role": "user", "content": "3+3?"}],
        "answer": "6",
    },
    {"prompt": "5+5?", "answer": "10", "info": '{"source": "json-string"}', "id": "ten"},
]


def test_from_records_normalises_prompt_answer_info_and_keeps_extra_columns() -> None:
    ts = TaskSet.from_records(RECORDS)
    assert len(ts) == 3
    assert ts[0].prompt == [{"role": "user", "content": "2+2?"}]
    assert ts[0].info == {"difficulty": "easy"}
    assert ts[1].prompt[0]["role"] == "system"
    assert ts[2].info == {"source": "json-string"}
    assert ts[2].id == "ten"
    assert ts[0].id and ts[0].id != ts[1].id  # content ids are stable and distinct
    assert TaskSet.from_records(RECORDS)[0].id == ts[0].id


def test_record_without_prompt_is_a_clear_error() -> None:
    with pytest.raises(ValueError, match=r"record 1: .*neither 'prompt' nor 'question'"):
        TaskSet.from_records([{"question": "a"}, {"answer": "x"}])


def test_file_loaders_agree(tmp_path: Path) -> None:
    flat = [{"question": f"q{i}", "answer": str(i)} for i in range(5)]
    (tmp_path / "t.jsonl").write_text("\n".join(json.dumps(r) for r in flat) + "\n\n")
    (tmp_path / "t.json").write_text(json.dumps({"data": flat}))
    (tmp_path / "t.csv").write_text("question,answer\n" + "".join(f"q{i},{i}\n" for i in range(5)))
    loaded = [
        TaskSet.from_jsonl(tmp_path / "t.jsonl"),
        TaskSet.from_json(tmp_path / "t.json"),
        TaskSet.from_csv(tmp_path / "t.csv"),
    ]
    for ts in loaded:
        assert [t.answer for t in ts] == ["0", "1", "2", "3", "4"]
        assert [t.id for t in ts] == [t.id for t in loaded[0]]


def test_bad_jsonl_names_the_line(tmp_path: Path) -> None:
    path = tmp_path / "bad.jsonl"
    path.write_text('{"question": "a"}\n{"question": \n')
    with pytest.raises(ValueError, match=r"bad.jsonl:2: not valid JSON"):
        TaskSet.from_jsonl(path)


def test_from_hf_dataset_and_saved_directory(tmp_path: Path) -> None:
    require(
        importlib.util.find_spec("datasets") is not None, "the `datasets` package (extra: datasets)"
    )
    import datasets

    ds = datasets.Dataset.from_list([{"question": f"q{i}", "answer": str(i)} for i in range(4)])
    assert [t.answer for t in TaskSet.from_hf(ds)] == ["0", "1", "2", "3"]
    dd = datasets.DatasetDict({"train": ds, "test": ds.select([0])})
    dd.save_to_disk(str(tmp_path / "saved"))
    assert len(TaskSet.from_hf(tmp_path / "saved")) == 4
    assert len(TaskSet.from_hf(str(tmp_path / "saved"), split="test")) == 1
    with pytest.raises(ValueError, match="split 'nope' not in dataset"):
        TaskSet.from_hf(dd, split="nope")
    with pytest.raises(ValueError, match="nothing is downloaded"):
        TaskSet.from_hf("gsm8k")


@pytest.mark.parametrize("name", ["csv", "json", "parquet", "/etc", "/etc/hostname"])
def test_from_hf_of_what_is_no_dataset_is_a_dataset_error(name: str) -> None:
    """Issue 37: `from_hf("csv")`/`("json")` raised DatasetGenerationError and `("/etc")`
    FileNotFoundError, where docs/sdk.md promises DatasetError."""
    require(importlib.util.find_spec("datasets") is not None, "the `datasets` package")
    with pytest.raises(DatasetError) as caught:
        TaskSet.from_hf(name)
    assert name in str(caught.value)


def test_from_generator_bounds_an_endless_source() -> None:
    def endless():
        i = 0
        while True:
            yield {"question": f"{i}+{i}", "answer": str(2 * i)}
            i += 1

    ts = TaskSet.from_generator(endless, n=7)
    assert len(ts) == 7 and ts[6].answer == "12"
    assert len(TaskSet.from_generator([Task(prompt=[{"role": "user", "content": "x"}])])) == 1


def test_shuffle_is_deterministic_across_processes() -> None:
    ts = TaskSet.from_records({"question": f"q{i}"} for i in range(50))
    order = [t.prompt[0]["content"] for t in ts.shuffle(7)]
    assert order != [t.prompt[0]["content"] for t in ts]
    assert order == [t.prompt[0]["content"] for t in ts.shuffle(7)]
    assert order != [t.prompt[0]["content"] for t in ts.shuffle(8)]
    code = (
        "from prime_env import TaskSet;"
        "ts=TaskSet.from_records({'question': f'q{i}'} for i in range(50));"
        "print(','.join(t.prompt[0]['content'] for t in ts.shuffle(7)))"
    )
    out = python_output(code, {"PYTHONHASHSEED": "123", "PATH": "/usr/bin"})
    assert out.strip().split(",") == order


def test_head_and_split() -> None:
    ts = TaskSet.from_records({"question": f"q{i}"} for i in range(10))
    assert len(ts.head(3)) == 3 and len(ts.head(None)) == 10 and len(ts.head(-1)) == 10
    train, evals = ts.split(0.2, seed=1)
    assert len(train) == 8 and len(evals) == 2
    assert {t.id for t in train}.isdisjoint({t.id for t in evals})
    assert [t.id for t in ts.split(0.2, seed=1)[1]] == [t.id for t in evals]
    assert [t.id for t in ts.split(3, seed=None)[1]] == [t.id for t in ts[7:]]
    with pytest.raises(ValueError, match="outside"):
        ts.split(11)
