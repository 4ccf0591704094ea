"""A multi-turn verifiers 0.4 package (its `Env.run()` plays a scripted user over an
interaction): `prime eval run` records each turn as a call continuing the one before (so
training can bridge the turns token for token)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from testing.server import FakeServer
from tests.e2e.eval_support import run_dirs
from tests.e2e.foreign_support import copy_project, foreign_env
from tests.e2e.test_foreign_verifiers import ok, prime, records
from tests.hub_server.hubproc import start_hub

pytestmark = [pytest.mark.timeout(1200), pytest.mark.xdist_group("foreign-verifiers-multiturn")]


@pytest.fixture(scope="module")
def installed(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    root = tmp_path_factory.mktemp("foreign-multiturn")
    with start_hub(root / "hub") as hub:
        env = foreign_env(root / "home", PRIME_HUB_URL=hub.url)
        token = hub.add_user("alice")
        project = copy_project("verifiers_sorting", root)
        ok(prime({**env, "PRIME_API_KEY": token}, "env", "push", str(project), cwd=root))
        ok(prime(env, "env", "install", "alice/sorting-v1", cwd=root))
        yield {"env": env, "root": root}


def test_eval_records_every_turn(installed: dict[str, Any]) -> None:
    env, root = installed["env"], installed["root"]
    with FakeServer("openai") as fake:
        fake.script_replies(["fig pear", "fig kiwi pear", "fig kiwi", "nope"])  # -c 1: in order
        out = root / "eval"
        ok(prime(
            env, "eval", "run", "alice/sorting-v1", "-m", "fake", "-b", fake.url, "-n", "2",
            "-r", "1", "-c", "1", "-o", str(out), cwd=root,
        ))  # fmt: skip
    [run] = run_dirs(out)
    got = sorted(records(run), key=lambda r: r["example_index"])
    assert [r["reward"] for r in got] == [1.0, 0.5]
    assert [r["metrics"]["turns_answered"] for r in got] == [2.0, 2.0]
    first = got[0]
    assert [m["role"] for m in first["prompt"] + first["completion"]] == [
        "user", "assistant", "user", "assistant",
    ]  # fmt: skip
    assert first["trace"]["calls"][1]["parent"] == 0  # the second turn continues the first
