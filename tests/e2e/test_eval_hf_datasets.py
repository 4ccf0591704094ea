"""Datasets by name: an environment built with `TaskSet.from_hf("org/name", split=…,
columns={…})` evaluates from the local Hugging Face cache, offline, and one whose dataset is not
cached is refused with a clear error. The cache is a real one, written by `datasets` itself
(the JSON builder a Hub download of JSON files goes through), nothing is downloaded."""

from __future__ import annotations

import json
from pathlib import Path

from testing.server import FakeServer
from tests.e2e.cli_support import one_line_error
from tests.e2e.eval_support import prime, prime_env, records, run_dirs
from tests.support import free_port

ENV = """
import prime_env as pe


def exact(completion, answer):
    return 1.0 if (pe.last_assistant_text(completion) or "").strip() == answer else 0.0


def load_environment(dataset="acme/tiny-qa", split="test"):
    tasks = pe.TaskSet.from_hf(
        dataset, split=split, columns={"problem": "question", "solution": "answer"}
    )
    return pe.Environment(tasks, pe.SingleTurn(), pe.Rubric([exact]), name="tiny-qa")
"""


def cache_dataset(cache: Path, repo_id: str, splits: dict[str, list[dict[str, object]]]) -> None:
    """Write `repo_id` into the datasets cache at `cache` as a Hub download of JSON files
    leaves it (`<org>___<name>/default/0.0.0/<hash>/`, Arrow files and dataset_info.json)."""
    from datasets.packaged_modules.json.json import Json

    files = {}
    for split, rows in splits.items():
        path = cache.parent / f"{split}.jsonl"
        path.write_text("".join(json.dumps(row) + "\n" for row in rows))
        files[split] = str(path)
    builder = Json(
        cache_dir=str(cache),
        dataset_name=repo_id.split("/")[1],
        data_files=files,
        hash="0123abcd",
        config_name="default",
        config_id="default",
    )
    # what load_dataset("org/name") sets from the Hub; given after init, as the local files
    # are not the repository's
    builder.repo_id = repo_id
    builder._cache_dir = builder._build_cache_dir()
    builder.download_and_prepare()


def test_from_hf_reads_the_local_cache_offline(tmp_path: Path) -> None:
    cache = tmp_path / "hf" / "datasets"
    cache.mkdir(parents=True)
    cache_dataset(
        cache,
        "acme/tiny-qa",
        {
            "train": [{"problem": "say: a", "solution": "a", "level": 0}],
            "test": [{"problem": f"say: w{i}", "solution": f"w{i}", "level": i} for i in range(3)],
        },
    )
    env_file = tmp_path / "tiny_qa.py"
    env_file.write_text(ENV)
    env = {k: v for k, v in prime_env(HOME=str(tmp_path)).items() if not k.startswith("HF_")}
    env.update(
        HF_DATASETS_CACHE=str(cache),
        # a download attempted anyway would go here, and fail: nothing listens
        HF_ENDPOINT=f"http://127.0.0.1:{free_port()}",
    )
    with FakeServer("openai") as server:
        result = prime(
            "eval", "run", str(env_file), "-m", "fake", "-b", server.url, "-n", "-1", "-r", "1",
            "-o", str(tmp_path / "out"), cwd=tmp_path, env=env,
        )  # fmt: skip
        assert result.returncode == 0, result.stderr
        missing = prime(
            "eval", "run", str(env_file), "-a", '{"dataset": "acme/not-cached"}', "-m", "fake",
            "-b", server.url, "-o", str(tmp_path / "missing"), cwd=tmp_path, env=env,
        )  # fmt: skip
        wrong_split = prime(
            "eval", "run", str(env_file), "-a", '{"split": "validation"}', "-m", "fake",
            "-b", server.url, "-o", str(tmp_path / "missing"), cwd=tmp_path, env=env,
        )  # fmt: skip
    [run] = run_dirs(tmp_path / "out")
    rows = sorted(records(run), key=lambda r: r["example_index"])  # written as each completes
    assert [(r["answer"], r["reward"], r["info"]["level"]) for r in rows] == [
        ("w0", 1.0, 0),
        ("w1", 1.0, 1),
        ("w2", 1.0, 2),
    ]
    assert "Using the latest cached version" not in result.stderr
    one_line_error(missing, "'acme/not-cached' is not in the local cache", str(cache))
    one_line_error(wrong_split, "split 'validation' not in dataset", "['train', 'test']")
    assert not (tmp_path / "missing").exists()
