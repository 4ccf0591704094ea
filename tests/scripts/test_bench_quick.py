"""Each benchmark script runs end to end in its quick mode, so the scripts cannot rot.

Not a timed test: it asserts that a script finishes, compares against its peer in the same run
and prints the ratio and the load, never how fast anything was.
"""

from __future__ import annotations

import re
import subprocess
import sys

import pytest

from sandbox.backends.docker import docker_available, image_exists
from sandbox.limits import DEFAULT_IMAGE
from tests.scripts.quick import ROOT, run_quick, run_quick_on_local_model
from tests.support import require


@pytest.mark.slow
def test_bench_eval_quick() -> None:
    out = run_quick("bench_eval.py", "--quick")
    assert re.search(r"\*\*[\d.]+x\*\*", out), out  # the fair ratio prime / vf-eval
    assert "load" in out and "vf-eval, best" in out
    assert "arithmetic" in out and "prime-w2" in out


def test_bench_eval_runner_only_needs_no_peer() -> None:
    out = run_quick("bench_eval.py", "--quick", "--runner-only")
    assert "vf-eval" not in out and "vf " not in out  # no peer run, no venv built for it
    assert "of ideal" in out and "prime-w2" in out and re.search(r"load \d", out)
    refused = subprocess.run(
        [sys.executable, str(ROOT / "scripts" / "bench_eval.py"), "--runner-only", "--write-docs"],
        capture_output=True,
        text=True,
        check=False,
    )
    assert refused.returncode == 2 and "needs the full run" in refused.stderr


@pytest.mark.slow
@pytest.mark.docker
@pytest.mark.xdist_group("docker")  # starts Docker sandboxes (tests/conftest.py)
def test_bench_sandbox_quick() -> None:
    require(docker_available() and image_exists(DEFAULT_IMAGE), "Docker and the sandbox image")
    out = run_quick("bench_sandbox.py", "--quick")
    assert "ratio vs peer" in out and "pre-started containers" in out
    assert re.search(r"load \d", out)


@pytest.mark.slow
def test_bench_registry_quick() -> None:
    out = run_quick("bench_registry.py", "--quick")
    assert "hub/devpi" in out and "hub/pypiserver" in out
    assert re.search(r"load [\d.]+ at the start", out)


@pytest.mark.slow
def test_bench_evals_quick() -> None:
    out = run_quick("bench_evals.py", "--rollouts", "200", "--runs", "4", "--repeats", "5")
    assert "ratio hub/baseline" in out and "load average" in out


# The benches of the in-process model: what each prints of its runs.
LOCAL_MODEL_FIGURES = {
    "bench_local_model.py": [
        r"batch 1 .* ratio [\d.]+",
        r"-c 8 .* ratio [\d.]+",
        r"load \(1-min avg\)",
    ],
    "bench_lab.py": [
        r"\| 2 \| [\d.]+ \| [\d.]+x \|",
        r"\| 2 \| batched \| [\d.]+ \| [\d.]+ \| [\d.]+ \| [\d.]+x \|",
        r"\| 4 requests, four adapters \| [\d.]+ \| [\d.]+x \|",
        r"queueing: .* (\d+) of tenant 0's steps finished before",
        "load",
    ],
    "bench_sampler_gpu.py": [
        r"served batch +4: .* ratio [\d.]+",
        r"steps +batch +4: .* ratio [\d.]+",
        r"load \(1-min avg\)",
    ],
}


@pytest.mark.slow
@pytest.mark.parametrize("script", sorted(LOCAL_MODEL_FIGURES))
def test_local_model_bench_quick(script: str) -> None:
    out = run_quick_on_local_model(script, "--quick")
    for figure in LOCAL_MODEL_FIGURES[script]:
        assert re.search(figure, out), out


@pytest.mark.slow
def test_bench_train_quick() -> None:
    out = run_quick("bench_train.py", "async", "--quick")
    assert re.search(r"async/sync steps/hour: [\d.]+x", out), out
    assert "load" in out


@pytest.mark.slow  # SmolLM2 on CPU answers and reflects: a few tiny generations
def test_bench_optimize_quick() -> None:
    out = run_quick("bench_optimize.py", "--quick")
    assert "Gain on held-out" in out and "the environment's" in out and "load average" in out


@pytest.mark.slow
def test_bench_downloads_quick() -> None:
    """64 concurrent downloads from a real hub: no 5xx (the script's figure is 300, p99 < 5 s;
    the budget is lifted here, so nothing is timed)."""
    out = run_quick("bench_downloads.py", "--quick", "--p99-budget", "1e9")
    assert "5xx answers: 0" in out and "load average" in out and "idle median" in out


@pytest.mark.slow
def test_bench_distill_quick() -> None:
    """A teacher, its adapter and a student on a tiny model: the table prints. One method: the
    script runs each the same way (`--algo M`); rft and opd themselves are test_train_algos'."""
    out = run_quick("bench_distill.py", "--quick", "--methods", "opd")
    assert "| grpo (teacher) |" in out and "| opd |" in out, out
    assert re.search(r"GRPO's CPU-s to the bar: [\d.]+", out) and "load" in out
