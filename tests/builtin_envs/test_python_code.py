"""python-code: hidden tests run in a real sandbox (Docker and local); candidate failures score 0,
sandbox failures become error records."""

from __future__ import annotations

import asyncio
import os

import pytest
from python_code import PARSER, Executor, load_environment, problems

from prime_env import run_rollouts, summarize
from prime_env.reference_check import validate_reference
from tests.builtin_envs.policy import PolicyClient
from tests.support import require

pytestmark = pytest.mark.xdist_group("docker")  # starts Docker sandboxes (tests/conftest.py)

FENCE = "```"


def _docker_ready() -> bool:
    from sandbox import resolve_backend

    return resolve_backend("auto") == "docker"


@pytest.fixture(params=["docker", "local"])
def backend(request: pytest.FixtureRequest) -> str:
    if request.param == "docker":
        require(_docker_ready(), "the Docker daemon with the prime sandbox image")
    return request.param


def _reply(code: str) -> str:
    return f"Here is my solution.\n{FENCE}python\n{code}\n{FENCE}\n"


def _by_prompt(env) -> dict[str, dict]:
    by_id = {p["id"]: p for p in problems()}
    return {t.prompt[-1]["content"]: by_id[t.id] for t in env.get_eval_tasks()}


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (f"{FENCE}python\ndef f():\n    return 1\n{FENCE}", "def f():\n    return 1"),
        (
            f"a\n{FENCE}py\nx = 1\n{FENCE}\nb\n{FENCE}python\ny = 2\n{FENCE}",
            "y = 2",
        ),  # the last block
        (f"{FENCE}\nz = 3\n{FENCE}", "z = 3"),
        (f"{FENCE}python\ndef f():\n    return 1\n", None),  # unclosed
        ("def f(): return 1", None),  # no block
        (f"{FENCE}python\n\n{FENCE}", None),  # empty
    ],
)
def test_code_block_parser_is_strict(text: str, expected: str | None) -> None:
    assert PARSER.parse_text(text) == expected


def test_problem_set_is_large_and_well_formed() -> None:
    rows = problems()
    assert len(rows) >= 50
    assert len({r["entry_point"] for r in rows}) == len(rows)
    for row in rows:
        assert len(row["tests"]) >= 2 and all(t.startswith("assert ") for t in row["tests"])
        assert f"def {row['entry_point']}(" in row["reference"]
    env = load_environment()
    assert len(env.get_eval_tasks()) == 16 and len(env.tasks) == len(rows) - 16
    for task in env.get_eval_tasks():
        assert "tests" not in task.info and "assert" not in task.prompt[-1]["content"]


async def test_every_reference_solution_passes_its_tests_in_the_sandbox(backend: str) -> None:
    executor = Executor(backend)
    semaphore = asyncio.Semaphore(4)

    async def check(row: dict) -> tuple[str, float]:
        async with semaphore:
            outcome = await executor.run(row["reference"], row["tests"])
        return row["id"], outcome.fraction_passed

    results = await asyncio.gather(*(check(row) for row in problems()))
    assert [rid for rid, fraction in results if fraction != 1.0] == []


async def test_the_shipped_reference_passes_everything_through_the_harness(backend: str) -> None:
    report = await validate_reference(load_environment(backend=backend), concurrency=4)
    assert report.passed and report.errors == 0 and len(report.records) == 16
    assert all(r.metrics["all_passed"] == 1.0 for r in report.records)
    assert all(r.model == "reference" for r in report.records)


async def test_empty_and_stub_policies_score_zero(backend: str) -> None:
    env = load_environment(backend=backend)
    by_prompt = _by_prompt(env)
    stub = PolicyClient(
        lambda m: _reply(
            f"def {by_prompt[m[-1]['content']]['entry_point']}(*args):\n    return None"
        )
    )
    empty = PolicyClient(lambda m: "I don't know.")
    stub_records = await run_rollouts(env, stub, n=6, concurrency=3)
    empty_records = await run_rollouts(env, empty, n=6)
    assert summarize(stub_records).reward_mean < 0.1 and summarize(stub_records).errors == 0
    assert summarize(empty_records).reward_mean == 0.0 and summarize(empty_records).errors == 0


HOSTILE = {
    "infinite loop": "def add(a, b):\n    while True:\n        pass",
    "sleeps past the timeout": "import time\ndef add(a, b):\n    time.sleep(60)",
    "exits the process": "import os\nos._exit(0)",
    "sys.exit at import": "import sys\nsys.exit(0)",
    "prints a fake pass": "print('pass')\nimport os\nos._exit(0)",
    "memory hog": "def add(a, b):\n    x = bytearray(4 * 1024 ** 3)\n    return a + b",
    "fork bomb": "import os\ndef add(a, b):\n    while True:\n        os.fork()",
    "syntax error": "def add(a, b) return a + b",
    "huge output": "def add(a, b):\n    print('x' * 50_000_000)\n    return a + b + 1",
    # Forgeries of the runner's report: every open fd gets a fake pass, the parent's stdout
    # gets a fake result line, and an object claims to equal anything.
    "writes pass to every fd": (
        "import os\nfor fd in range(3, 256):\n    try:\n        os.write(fd, b'pass')\n"
        "    except OSError:\n        pass\nos._exit(0)"
    ),
    "forges the result line": (
        "import gc, os\nspec = next(o for o in gc.get_objects() if isinstance(o, dict) and 'marker' in o)\n"
        'line = spec[\'marker\'] + \'[{"passed": true, "repr": "-1"}, {"passed": true}]\\n\'\n'
        "with open(f'/proc/{os.getppid()}/fd/1', 'w') as out:\n    out.write(line * 2)\n"
        "def add(a, b):\n    return -1"
    ),
    "equals everything": (
        "class Any:\n    def __eq__(self, other):\n        return True\n"
        "def add(a, b):\n    return Any()"
    ),
}


@pytest.mark.parametrize("name", sorted(HOSTILE))
async def test_hostile_candidates_fail_their_tests_without_erroring(
    backend: str, name: str
) -> None:
    executor = Executor(backend, per_test_timeout=2.0)
    tests = ["assert add(1, 2) == 3", "assert add(0, 0) == 0"]
    outcome = await executor.run(HOSTILE[name], tests)
    assert outcome.fraction_passed == 0.0, outcome
    if name in ("infinite loop", "sleeps past the timeout"):
        assert all("timed out" in r["error"] for r in outcome.results)


async def test_partial_solution_gets_partial_credit(backend: str) -> None:
    executor = Executor(backend)
    tests = [
        "assert add(1, 2) == 3",
        "assert add(2, 2) == 4",
        "assert add(-1, 1) == 0",
        "assert add(5, 5) == 10",
    ]
    outcome = await executor.run("def add(a, b):\n    return 4 if a == 2 else a * b + 2", tests)
    # 1*2+2 = 4 (wrong), 2 -> 4 (right), -1*1+2 = 1 (wrong), 5*5+2 (wrong)
    assert outcome.fraction_passed == 0.25


async def test_candidate_code_never_runs_in_the_host_process(tmp_path, backend: str) -> None:
    marker = tmp_path / "host-was-touched"
    code = f"open({str(marker)!r}, 'w').write('x')\ndef add(a, b):\n    return a + b"
    outcome = await Executor(backend).run(code, ["assert add(1, 2) == 3"])
    assert not marker.exists()
    assert outcome.fraction_passed == 0.0  # the write fails inside the sandbox, so import fails


async def test_a_dying_sandbox_is_an_error_record_not_a_zero() -> None:
    require(_docker_ready(), "the Docker daemon with the prime sandbox image")
    import docker

    from sandbox.backends.docker import LABEL, LABEL_OWNER
    from sandbox.owner import Owner

    env = load_environment(backend="docker")
    slow = "import time\ntime.sleep(20)\n"
    client = PolicyClient(lambda m: _reply(slow))
    run = asyncio.create_task(run_rollouts(env, client, n=1, r=1))
    docker_api = docker.from_env()

    def ours() -> list:
        found = docker_api.containers.list(filters={"label": LABEL})
        return [c for c in found if Owner.decode(c.labels.get(LABEL_OWNER, "")).pid == os.getpid()]

    for _ in range(300):
        containers = ours()
        if containers and not run.done():
            await asyncio.sleep(1.0)  # let the test run start inside the container
            for container in ours():
                container.kill()
            break
        await asyncio.sleep(0.1)
    records = await run
    record = records[0]
    assert record.reward is None and record.rewards in ({}, None)
    assert record.error is not None and "sandbox" in record.error.type, record.error
    assert summarize(records).errors == 1


def test_bad_arguments_are_rejected_clearly() -> None:
    with pytest.raises(ValueError, match="backend must be"):
        load_environment(backend="cloud")
    with pytest.raises(ValueError, match="per_test_timeout"):
        load_environment(per_test_timeout=0)


# Wrong answers that try to turn their failure into an excluded sandbox error (issue 9, item 1):
# each runs its attack when the candidate's module loads, then returns a wrong value.
REWARD_HACKS = {
    "kills pid 1": (
        "import os, signal\nfor sig in (signal.SIGINT, signal.SIGTERM, signal.SIGKILL):\n"
        "    try:\n        os.kill(1, sig)\n    except OSError:\n        pass"
    ),
    "kills its parent and grandparent": (
        "import os\nparent = os.getppid()\n"
        "grandparent = int(open(f'/proc/{parent}/stat').read().rsplit(')', 1)[1].split()[1])\n"
        "for pid in (grandparent, parent):\n    try:\n        os.kill(pid, 9)\n"
        "    except OSError:\n        pass"
    ),
    "kill -9 -1": "import os\nos.kill(-1, 9)",
    "leaves a setsid survivor": (
        "import subprocess\nsubprocess.Popen(['sleep', '300'], start_new_session=True,\n"
        "    stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)"
    ),
    "double forks": (
        "import os, time\nif os.fork() == 0:\n    if os.fork() == 0:\n        os.setsid()\n"
        "        time.sleep(300)\n    os._exit(0)"
    ),
    "fills the disk": (
        "import os\nfor folder in ('.', os.environ.get('TMPDIR', '/tmp')):\n    try:\n"
        "        with open(os.path.join(folder, 'fill'), 'wb') as out:\n"
        "            while True:\n                out.write(b'x' * (16 << 20))\n"
        "    except OSError:\n        pass"
    ),
    "spreads memory over 6 processes": (
        "import os, time\nchildren = []\nfor _ in range(6):\n    pid = os.fork()\n"
        "    if pid == 0:\n        block = bytearray(100 << 20)\n"
        "        block[::4096] = b'x' * len(block[::4096])\n        time.sleep(1)\n"
        "        os._exit(0)\n    children.append(pid)\nfor pid in children:\n"
        "    os.waitpid(pid, 0)"
    ),
}


@pytest.mark.parametrize("name", sorted(REWARD_HACKS))
async def test_a_wrong_answer_that_attacks_its_sandbox_scores_zero_not_an_error(
    backend: str, name: str
) -> None:
    # A survivor holding the runner's report pipe costs the candidate its per-test timeout.
    env = load_environment(backend=backend, per_test_timeout=2.0)
    by_prompt = _by_prompt(env)

    def wrong(messages: list[dict]) -> str:
        entry_point = by_prompt[messages[-1]["content"]]["entry_point"]
        return _reply(
            f"{REWARD_HACKS[name]}\ndef {entry_point}(*args, **kwargs):\n    return object()"
        )

    records = await run_rollouts(env, PolicyClient(wrong), n=1, r=1)
    assert [(r.reward, r.error) for r in records] == [(0.0, None)], records[0].error
