"""vowels.py's tasks with the reward computed in a sandbox, so that every rollout reaches one.

For the sandbox fault tests of `prime train` (tests/e2e/test_train_docker.py): python-code
runs the model's code only when the model writes a complete code block, which takes SmolLM2
and minutes of generation; here each rollout, whatever the (tiny) model said, counts its
reply's vowels in a fresh sandbox of `backend`, holding it `hold_s` seconds so a test can see
the container running. A sandbox failure propagates (an error record, never a 0), as in
python-code.
"""

from __future__ import annotations

from typing import Any

from vowels import task  # the sibling file: loaded by path, this directory is on sys.path

from prime_env import Environment, Rubric, SingleTurn, last_assistant_text
from sandbox import SandboxLimits, open_async_sandbox

WORDS = ["apple", "river", "stone", "cloud", "music", "tiger", "lemon", "ocean"]
COUNT = (
    "import sys, time; time.sleep(float(sys.argv[1])); "
    "t = [c for c in sys.stdin.read().lower() if c.isalpha()]; "
    "print(sum(c in 'aeiou' for c in t) / len(t) if t else 0.0)"
)


def load_environment(
    backend: str = "docker", hold_s: float = 0.0, num_tasks: int = 16
) -> Environment:
    async def vowels_in_sandbox(completion: list[dict[str, Any]]) -> float:
        text = last_assistant_text(completion) or ""
        limits = SandboxLimits(memory_mb=256, pids=16, timeout_s=60.0)
        async with open_async_sandbox(backend, limits=limits) as sb:
            result = await sb.exec(
                ["python3", "-I", "-c", COUNT, str(hold_s)], stdin=text, timeout=30 + hold_s
            )
        return float(result.stdout_text.strip() or 0.0)

    return Environment(
        [task(i, "train", WORDS) for i in range(num_tasks)],
        SingleTurn(),
        Rubric([vowels_in_sandbox]),
        name="sandboxed-vowels",
        eval_tasks=[task(i, "eval", WORDS) for i in range(2)],
    )
