"""`prime eval validate ENV`: every built-in's reference policy scores what it declares, with no
model; a broken reference fails with the tasks it falls short on; `-m reference` of an
environment without one is refused before anything is written."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.e2e.eval_support import ROOT, prime

BROKEN = """
import prime_env as pe

def exact(completion, answer):
    return 1.0 if completion[-1]["content"] == answer else 0.0

def off_by_one(messages, state):
    a, b = messages[-1]["content"].split("+")
    total = int(a) + int(b)
    return str(total + 1 if total == 7 else total)

def load_environment(reference: bool = True):
    tasks = [{"question": f"{a}+{b}", "answer": str(a + b), "id": f"t{a}"} for a, b in
             [(1, 2), (3, 4), (5, 6)]]
    return pe.Environment(tasks, pe.SingleTurn(), pe.Rubric([exact]), name="adder",
                          reference=pe.Reference(off_by_one, min_reward=1.0) if reference else None)
"""


@pytest.mark.parametrize(
    ("env", "args"),
    [
        ("wordle", ["-n", "40"]),  # the whole eval set (626 games) is in docs/builtin_envs.md
        ("wiki-search", []),
        ("reverse-text", []),
        ("arithmetic", ["-a", '{"difficulty": 5}']),
        ("python-code", ["-a", '{"backend": "local"}']),
        ("twenty-questions", []),
        ("wiki-search", ["-a", '{"tools": "mcp", "num_eval_examples": 10}']),
    ],
)
def test_every_builtin_reference_validates(env: str, args: list[str], tmp_path: Path) -> None:
    result = prime(
        "eval", "validate", str(ROOT / "builtin_envs" / env), *args, "--output", "json",
        cwd=tmp_path,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    report = json.loads(result.stdout)
    assert report["passed"] and report["errors"] == 0 and report["shortfalls"] == []
    expected = {"wordle": 40, "python-code": 16, "twenty-questions": 20, "wiki-search": 100}
    assert report["tasks"] == (10 if "mcp" in str(args) else expected.get(env, 200))
    assert list(tmp_path.iterdir()) == []  # validation writes nothing


def test_a_broken_reference_fails_and_names_the_task(tmp_path: Path) -> None:
    (tmp_path / "adder.py").write_text(BROKEN)
    result = prime("eval", "validate", "adder.py", cwd=tmp_path)
    assert result.returncode == 1 and "Traceback" not in result.stderr
    assert "FAIL" in result.stdout
    assert "task t3 (example 1): reward 0 < min_reward 1" in result.stdout
    assert "falls short on 1 check(s) of 3 task(s)" in result.stderr
    report = json.loads(
        prime("eval", "validate", "adder.py", "--output", "json", cwd=tmp_path).stdout
    )
    assert [s["task_id"] for s in report["shortfalls"]] == ["t3"] and report["mean"] == 2 / 3


def test_without_a_reference_validate_and_run_say_so(tmp_path: Path) -> None:
    (tmp_path / "adder.py").write_text(BROKEN)
    args = ["-a", '{"reference": false}']
    result = prime("eval", "validate", "adder.py", *args, cwd=tmp_path)
    assert result.returncode == 1 and "adder ships no reference policy to validate" in result.stderr
    run = prime("eval", "run", "adder.py", *args, "-m", "reference", "-o", "out", cwd=tmp_path)
    assert run.returncode == 1 and "ships no reference policy, so -m reference" in run.stderr
    assert "Traceback" not in run.stderr and not (tmp_path / "out").exists()
    bad = prime("eval", "validate", "adder.py", "-a", "{nope", cwd=tmp_path)
    assert bad.returncode == 2 and "--env-args is not valid JSON" in bad.stderr
