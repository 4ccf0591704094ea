"""Provider settings as the SDKs read them: OPENAI_BASE_URL / ANTHROPIC_BASE_URL honoured,
`--api openai|anthropic` with `-b URL` for any compatible server, the served model (the API's
`model` field) recorded beside the alias and shown on the leaderboard, and a run whose every
rollout failed never pushed."""

from __future__ import annotations

import json
from pathlib import Path

import httpx

from testing.server import FakeServer
from tests.e2e.cli_support import one_line_error
from tests.e2e.eval_support import SAY_ENV, hub_runs, prime, prime_env, records, run_dirs
from tests.e2e.test_eval_hub import publish_say_env
from tests.hub_server.hubproc import HubProcess
from tests.support import free_port

SNAPSHOT = "gpt-4.1-mini-2025-04-14"


def _only_run(out: Path) -> tuple[dict, list[dict]]:
    [run] = run_dirs(out)
    return json.loads((run / "metadata.json").read_text()), records(run)


def test_openai_base_url_is_honoured_and_the_served_model_recorded(tmp_path: Path) -> None:
    with FakeServer("openai", api_key="sk-test", served_model=SNAPSHOT) as server:
        env = prime_env(HOME=str(tmp_path), OPENAI_BASE_URL=server.url, OPENAI_API_KEY="sk-test")
        result = prime(
            "eval", "run", str(SAY_ENV), "-m", "openai/gpt-4.1-mini", "-n", "2", "-r", "1",
            "-o", str(tmp_path / "out"), cwd=tmp_path, env=env,
        )  # fmt: skip
    assert result.returncode == 0, result.stderr
    meta, rows = _only_run(tmp_path / "out")
    assert meta["base_url"] == server.url and meta["model"] == "openai/gpt-4.1-mini"
    assert meta["served_model"] == SNAPSHOT
    assert {(r["model"], r["served_model"], r["reward"]) for r in rows} == {
        ("gpt-4.1-mini", SNAPSHOT, 1.0)
    }


def test_anthropic_base_url_and_api_anthropic_with_a_url(tmp_path: Path) -> None:
    with FakeServer("anthropic", api_key="ak-test") as server:
        env = prime_env(
            HOME=str(tmp_path), ANTHROPIC_BASE_URL=server.url, ANTHROPIC_API_KEY="ak-test"
        )
        by_variable = prime(
            "eval", "run", str(SAY_ENV), "-m", "anthropic/claude-haiku-4-5", "-n", "2", "-r", "1",
            "-o", str(tmp_path / "a"), cwd=tmp_path, env=env,
        )  # fmt: skip
        by_flag = prime(
            "eval", "run", str(SAY_ENV), "-m", "my-claude", "--api", "anthropic",
            "-b", server.url, "-k", "ANTHROPIC_API_KEY", "-n", "2", "-r", "1",
            "-o", str(tmp_path / "b"), cwd=tmp_path, env=prime_env(
                HOME=str(tmp_path), ANTHROPIC_API_KEY="ak-test"
            ),
        )  # fmt: skip
    assert by_variable.returncode == 0, by_variable.stderr
    assert by_flag.returncode == 0, by_flag.stderr
    meta, rows = _only_run(tmp_path / "a")
    assert meta["base_url"] == server.url and {r["reward"] for r in rows} == {1.0}
    meta, rows = _only_run(tmp_path / "b")
    assert meta["model_info"]["client"] == "anthropic" and meta["config"]["api"] == "anthropic"
    assert {(r["served_model"], r["reward"]) for r in rows} == {("my-claude", 1.0)}


def test_api_without_a_url_is_a_clear_error(tmp_path: Path) -> None:
    env = {k: v for k, v in prime_env(HOME=str(tmp_path)).items() if not k.endswith("_BASE_URL")}
    result = prime(
        "eval", "run", str(SAY_ENV), "-m", "x", "--api", "anthropic", cwd=tmp_path, env=env
    )
    one_line_error(result, "--api anthropic", "-b URL", "ANTHROPIC_BASE_URL")
    assert not (tmp_path / "outputs").exists()


def test_leaderboard_shows_the_served_model_and_a_failed_run_is_never_pushed(
    hub: HubProcess, tmp_path: Path
) -> None:
    token = hub.add_user("alice")
    publish_say_env(hub, token, tmp_path / "dist")
    env = prime_env(HOME=str(tmp_path), PRIME_HUB_URL=hub.url, PRIME_API_KEY=token)
    with FakeServer("openai", served_model=SNAPSHOT) as server:
        good = prime(
            "eval", "run", str(SAY_ENV), "-m", "fake-gpt", "-b", server.url, "-n", "2", "-r", "1",
            "-o", str(tmp_path / "good"), cwd=tmp_path, env=env,
        )  # fmt: skip
    assert good.returncode == 0, good.stderr
    [good_dir] = run_dirs(tmp_path / "good")
    pushed = prime(
        "eval", "push", str(good_dir), "--env", "alice/say-env", "--public", cwd=tmp_path, env=env
    )
    assert pushed.returncode == 0, pushed.stderr

    dead = f"http://127.0.0.1:{free_port()}/v1"  # nothing listens: every call is refused
    failed = prime(
        "eval", "run", str(SAY_ENV), "-m", "down", "-b", dead, "--max-retries", "0",
        "-n", "2", "-r", "1", "-o", str(tmp_path / "bad"), "--push", cwd=tmp_path, env=env,
    )  # fmt: skip
    error = one_line_error(failed, "every rollout of down failed", "nothing of it was pushed")
    assert "Traceback" not in error
    [bad_dir] = run_dirs(tmp_path / "bad")
    again = prime(
        "eval", "push", str(bad_dir), "--env", "alice/say-env", "--public", cwd=tmp_path, env=env
    )
    one_line_error(again, "every rollout of this run failed", "connection_error", "not pushed")
    nothing_left = prime("eval", "push", "-o", str(tmp_path / "bad"), cwd=tmp_path, env=env)
    one_line_error(nothing_left, "no finished, unpushed runs")

    board = httpx.get(
        f"{hub.url}/api/v1/environmentshub/alice/say-env/leaderboard", timeout=30
    ).json()["data"]
    assert [(r["model"], r["served_model"]) for r in board] == [("fake-gpt", SNAPSHOT)]
    listed = hub_runs(hub.url, token, environment="alice/say-env")
    assert [e["model_name"] for e in listed] == ["fake-gpt"]  # the failed run is not there
    page = httpx.get(f"{hub.url}/alice/say-env", timeout=30).text
    assert f"served as {SNAPSHOT}" in page
