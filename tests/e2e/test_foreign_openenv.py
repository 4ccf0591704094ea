"""An OpenEnv environment, unchanged: the echo environment `openenv init echo_env` writes
(openenv-core 0.3.0's own example, tests/foreign/openenv_echo) is pushed to this hub, installed
into a virtualenv of its own, evaluated (its server started by the environment worker, driven
with openenv-core's client, its reward the rubric's) and trained on for 2 steps; a server that
dies mid-run (one the test runs, named with the `url` env arg: the echo environment as
`prime env init --template openenv` writes it) gives error records, not zeros.

One hub and one install for the module; the virtualenv is built from the wheelhouse."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from testing.server import FakeServer
from tests.e2e.cli_support import PRIME
from tests.e2e.eval_support import records, run_dirs
from tests.e2e.foreign_support import FOREIGN, copy_project, foreign_env
from tests.e2e.test_foreign_verifiers import ok, prime
from tests.e2e.train_support import NO_EVAL, two_token_exact_steps
from tests.hub_server.hubproc import start_hub
from tests.support import free_port

pytestmark = [pytest.mark.timeout(1200), pytest.mark.xdist_group("foreign-openenv")]

ENV = "alice/openenv-echo-env"
SEED0 = 19.0
"""The echo server's reward (0.1 per character echoed) for 2 steps of the fake model, which
repeats each observation: the 70-character reset observation (7.0), then the 120-character
observation of that echo (12.0)."""


@pytest.fixture(scope="module")
def installed(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    """The echo environment pushed to a fresh hub and installed with `prime env install`."""
    root = tmp_path_factory.mktemp("foreign-openenv")
    with start_hub(root / "hub") as hub:
        env = foreign_env(root / "home", PRIME_HUB_URL=hub.url)
        token = hub.add_user("alice")
        project = copy_project("openenv_echo", root)
        ok(prime(env, "env", "init", "my-echo", "--template", "openenv", cwd=root))
        for path in (project, root / "my-echo"):
            ok(prime({**env, "PRIME_API_KEY": token}, "env", "push", str(path), cwd=root))
        install = prime(env, "env", "install", ENV, "alice/my-echo", cwd=root)
        ok(install)
        envs = Path(env["XDG_DATA_HOME"]) / "prime" / "envs"
        record, scaffolded = (
            json.loads((envs / name / "environment.json").read_text())
            for name in ("openenv-echo-env", "my-echo")
        )
        yield {
            "env": env, "root": root, "install": install, "record": record,
            "scaffolded": scaffolded,
        }  # fmt: skip


def test_install_and_eval_drive_its_server(installed: dict[str, Any]) -> None:
    assert "it is an environment of openenv" in installed["install"].stderr
    assert installed["record"]["kind"] == "openenv"
    assert installed["record"]["module"] == "echo_env"
    env, root = installed["env"], installed["root"]
    with FakeServer("openai") as fake:
        out = root / "eval"
        ok(prime(
            env, "eval", "run", ENV, "-m", "fake", "-b", fake.url, "-n", "2", "-r", "1",
            "-a", '{"max_turns": 2}', "-o", str(out), cwd=root,
        ))  # fmt: skip
    [run] = run_dirs(out)
    got = sorted(records(run), key=lambda r: r["example_index"])
    assert [r["error"] for r in got] == [None, None]
    first = got[0]
    assert first["task_id"] == "seed-0" and first["stop_reason"] == "max_turns"
    assert first["metrics"] == {"steps": 2.0, "last_reward": 12.0}
    assert first["reward"] == pytest.approx(SEED0)  # the server's rewards, summed
    reset = json.dumps({"echoed_message": "Echo Env environment ready!", "message_length": 0})
    assert first["prompt"][-1] == {"role": "user", "content": reset}
    assert [m["role"] for m in first["completion"]] == ["assistant", "user", "assistant"]
    assert first["completion"][0]["content"] == reset  # the fake model repeats; echo echoes
    assert json.loads(first["completion"][1]["content"])["echoed_message"] == reset


def test_a_server_that_dies_mid_run_gives_error_records(installed: dict[str, Any]) -> None:
    """The server here is the one `prime env init --template openenv` writes (OpenEnv's echo
    environment under another name), run by the test and named with the `url` env arg."""
    env, root = installed["env"], installed["root"]
    scaffolded = installed["scaffolded"]
    assert scaffolded["kind"] == "openenv" and scaffolded["module"] == "my_echo"
    port = free_port()
    server = subprocess.Popen(
        [scaffolded["python"], "-m", "uvicorn", "my_echo.server.app:app",
         "--host", "127.0.0.1", "--port", str(port), "--log-level", "warning"],
        cwd=root, start_new_session=True,
    )  # fmt: skip
    out = root / "killed"
    try:
        _wait_healthy(port, server)
        with FakeServer("openai", latency_ms=1500) as fake:
            run = subprocess.Popen(
                [str(PRIME), "eval", "run", "alice/my-echo", "-m", "fake", "-b",
                 fake.url, "-n", "6", "-r", "1", "-c", "1", "--max-error-share", "1",
                 "-a", json.dumps({"url": f"http://127.0.0.1:{port}", "max_turns": 2}),
                 "-o", str(out)],
                cwd=root, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
            )  # fmt: skip
            deadline = time.monotonic() + 600
            while not list(out.glob("evals/*/*/results.jsonl")) or not any(
                p.read_text().strip() for p in out.glob("evals/*/*/results.jsonl")
            ):
                assert run.poll() is None and time.monotonic() < deadline, run.communicate()
                time.sleep(0.2)
            os.killpg(server.pid, signal.SIGKILL)  # the server dies with rollouts to go
            stdout, stderr = run.communicate(timeout=600)
        assert run.returncode == 0, stdout[-3000:] + stderr[-3000:]
    finally:
        if server.poll() is None:
            os.killpg(server.pid, signal.SIGKILL)
        server.wait()
    [run_dir] = run_dirs(out)
    got = records(run_dir)
    assert len(got) == 6
    scored = [r for r in got if r["error"] is None]
    failed = [r for r in got if r["error"] is not None]
    assert scored and all(r["reward"] == pytest.approx(18.8) for r in scored)  # 6.9 + 11.9
    assert len(failed) >= 4  # at most one rollout was in flight when it died
    for record in failed:
        assert record["reward"] is None and record["rewards"] == {}
        assert record["error"]["type"] == "openenv_server_died", record["error"]


def test_an_mcp_servers_tools_are_the_models_tools(installed: dict[str, Any]) -> None:
    """tests/foreign/openenv_mcp: an OpenEnv `MCPEnvironment` whose one tool, `add`, brings a
    counter to its target; the fake model calls the tool its observation names."""
    env, root = installed["env"], installed["root"]
    port = free_port()
    server = subprocess.Popen(
        [installed["record"]["python"], "-m", "uvicorn", "counter_env.app:app",
         "--host", "127.0.0.1", "--port", str(port), "--log-level", "warning"],
        cwd=root, start_new_session=True,
        env={**os.environ, "PYTHONPATH": str(FOREIGN / "openenv_mcp")},
    )  # fmt: skip
    try:
        _wait_healthy(port, server)
        with FakeServer("openai") as fake:
            out = root / "mcp"
            ok(prime(
                env, "eval", "run", ENV, "-m", "fake", "-b", fake.url, "-n", "2", "-r", "1",
                "-a", json.dumps({"url": f"http://127.0.0.1:{port}"}), "-o", str(out), cwd=root,
            ))  # fmt: skip
    finally:
        os.killpg(server.pid, signal.SIGKILL)
        server.wait()
    [run] = run_dirs(out)
    got = sorted(records(run), key=lambda r: r["example_index"])
    assert [r["reward"] for r in got] == [1.0, 1.0]
    assert [r["stop_reason"] for r in got] == ["env_done", "env_done"]
    calls = [r["completion"][0]["tool_calls"][0]["function"] for r in got]
    assert calls == [
        {"name": "add", "arguments": '{"n": 3}'},
        {"name": "add", "arguments": '{"n": 4}'},
    ]


def _wait_healthy(port: int, server: subprocess.Popen[bytes]) -> None:
    import httpx

    deadline = time.monotonic() + 300
    while True:
        assert server.poll() is None, "the echo server exited"
        try:
            if httpx.get(f"http://127.0.0.1:{port}/health", timeout=2).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        assert time.monotonic() < deadline, "the echo server never answered"
        time.sleep(0.3)


@pytest.mark.slow  # starts the worker, the echo server and trains the local model twice
def test_train_two_steps_on_it(installed: dict[str, Any]) -> None:
    """`prime train`: the episodes run against the echo server, their model calls come back to
    the trainer's sampler, and the samples are token-exact."""
    env, root = installed["env"], installed["root"]
    out = root / "train"
    ok(prime(
        env, "train", ENV, "-m", "local/smollm2-135m", "--max-steps", "2", "-a",
        '{"max_turns": 1}', "--orchestrator.batch-size", "2",
        "--orchestrator.rollouts-per-example", "2", "--orchestrator.sampling.max-tokens", "8",
        *NO_EVAL, "--no-orchestrator.filter-zero-advantages", "-o", str(out), cwd=root,
    ))  # fmt: skip
    two_token_exact_steps(out)
