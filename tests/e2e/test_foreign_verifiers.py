"""verifiers 0.4 packages, unchanged, on this hub: `prime env install` gives each a virtualenv of
its own (verifiers pins openai<3, the SDK needs openai>=3.57), `prime eval run` scores them
through an environment worker (prime_env.remote) against a fake OpenAI server, a provider
failure is an error record (never a 0), and `prime train` trains the local model on the
multi-turn one (each turn a call continuing the last, bridged token for token; this also covers
the local model's token ids through the worker: no separate local-model eval).

One hub and one install home for the module (both packages, one uv cache); the virtualenvs are
built from the wheelhouse, never an index. Each `prime eval run` costs a verifiers import in
its worker (~6 s of CPU), so the module runs as few as it can."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from testing.server import FakeServer
from tests.e2e.cli_support import PRIME
from tests.e2e.eval_support import records, run_dirs
from tests.e2e.foreign_support import copy_project, foreign_env
from tests.e2e.train_support import NO_EVAL, two_token_exact_steps
from tests.hub_server.hubproc import start_hub

pytestmark = [pytest.mark.timeout(1200), pytest.mark.xdist_group("foreign-verifiers")]


def prime(env: dict[str, str], *args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(PRIME), *args], cwd=cwd, env=env, text=True, capture_output=True, timeout=900,
        check=False,
    )  # fmt: skip


def ok(result: subprocess.CompletedProcess[str]) -> str:
    assert result.returncode == 0, f"stdout:\n{result.stdout}\nstderr:\n{result.stderr[-4000:]}"
    return result.stdout


@pytest.fixture(scope="module")
def installed(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    """alice/addition-v1 and alice/sorting-v1 pushed to a fresh hub and installed with
    `prime env install`."""
    root = tmp_path_factory.mktemp("foreign-verifiers")
    with start_hub(root / "hub") as hub:
        env = foreign_env(root / "home", PRIME_HUB_URL=hub.url)
        token = hub.add_user("alice")
        for name in ("verifiers_addition", "verifiers_sorting"):
            project = copy_project(name, root)
            ok(prime({**env, "PRIME_API_KEY": token}, "env", "push", str(project), cwd=root))
        result = prime(env, "env", "install", "alice/addition-v1", "alice/sorting-v1", cwd=root)
        yield {"hub": hub, "env": env, "root": root, "install": result}


def test_install_gives_it_a_virtualenv_of_its_own(installed: dict[str, Any]) -> None:
    result = installed["install"]
    ok(result)
    assert "virtualenv of its own" in result.stderr and "verifiers" in result.stderr
    home = Path(installed["env"]["XDG_DATA_HOME"]) / "prime" / "envs" / "addition-v1"
    record = json.loads((home / "environment.json").read_text())
    assert record["kind"] == "verifiers" and record["module"] == "addition_v1"
    venv = Path(record["python"])
    versions = subprocess.run(
        [str(venv), "-c", ("import importlib.metadata as m; "
         "print(m.version('verifiers'), m.version('openai'))")],
        capture_output=True, text=True, check=True,
    ).stdout.split()  # fmt: skip
    assert versions[0] == "0.4.0" and versions[1].startswith("2.")
    # ... and nothing of it in the Python that runs `prime`
    here = subprocess.run(
        [sys.executable, "-c", "import importlib.util as u; print(u.find_spec('addition_v1'))"],
        capture_output=True, text=True, check=True,
    )  # fmt: skip
    assert here.stdout.strip() == "None"


def test_eval_scores_it_and_a_provider_failure_is_an_error_record(
    installed: dict[str, Any],
) -> None:
    env, root = installed["env"], installed["root"]
    with FakeServer("openai") as fake:
        # -c 1: rollouts in order, so the scripted answers meet known questions; the last
        # task's two requests fail (no retries): error records, not zeros
        fake.configure(script=["ok"] * 2 + ["500", "500"])
        fake.script_replies(["0", "5"])
        out = root / "fake-run"
        ok(prime(
            env, "eval", "run", "alice/addition-v1", "-m", "fake", "-b", fake.url, "-n", "2",
            "-r", "2", "-c", "1", "--max-retries", "0", "--max-error-share", "1", "-o",
            str(out), cwd=root,
        ))  # fmt: skip
    [run] = run_dirs(out)
    got = sorted(records(run), key=lambda r: (r["example_index"], r["rollout_index"]))
    assert [r["reward"] for r in got] == [1.0, 0.0, None, None]
    assert got[1]["rewards"] == {"exact_match": 0.0}
    assert got[1]["metrics"] == {"reply_chars": 1.0}
    first = got[0]
    assert first["error"] is None and first["answer"] == 0
    assert first["prompt"][-1] == {"role": "user", "content": "What is 0 + 0?"}
    assert first["completion"] == [{"role": "assistant", "content": "0"}]
    assert first["env"] == "alice/addition-v1@0.1.0"
    assert first["stop_reason"] == "agent_completed"
    for failed in got[2:]:
        assert failed["rewards"] == {}
        assert failed["error"]["type"] in ("server_error", "http_500"), failed["error"]
    meta = json.loads((run / "metadata.json").read_text())
    assert meta["summary"]["errors"] == 2


@pytest.mark.slow  # starts the verifiers worker and trains the local model twice
def test_train_two_steps_on_a_multi_turn_package(installed: dict[str, Any]) -> None:
    """`prime train` on alice/sorting-v1, whose `Env.run()` plays a scripted user over an
    interaction: its rollouts run in its virtualenv, each turn's model call comes back to the
    trainer's sampler as a call continuing the last, bridged token for token (one sample per
    rollout, the second turn's prompt ids extend the first turn's), and the samples are
    token-exact (the trainer's logprobs of them match the sampler's)."""
    env, root = installed["env"], installed["root"]
    out = root / "train"
    ok(prime(
        env, "train", "alice/sorting-v1", "-m", "local/smollm2-135m", "--max-steps", "2",
        "--orchestrator.batch-size", "2", "--orchestrator.rollouts-per-example", "2",
        "--orchestrator.sampling.max-tokens", "8", *NO_EVAL,
        "--no-orchestrator.filter-zero-advantages", "-o", str(out), cwd=root,
    ))  # fmt: skip
    run = two_token_exact_steps(out)
    rollouts = [json.loads(line) for line in (run / "rollouts" / "step_0.jsonl").open()]
    assert rollouts
    for record in rollouts:
        assert record["error"] is None and record["metrics"]["turns_answered"] == 2.0
        roles = [m["role"] for m in record["prompt"] + record["completion"]]
        assert roles == ["user", "assistant", "user", "assistant"]
        assert record["trace"]["calls"][1]["parent"] == 0  # the second turn continues the first
        first, second = record["turns"]
        sampled = first["prompt_token_ids"] + first["completion_token_ids"]
        assert second["prompt_token_ids"][: len(sampled)] == sampled
