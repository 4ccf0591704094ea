"""`prime adapter …` and `prime lab publish` against the hub in-process: push, list, info,
pull byte for byte, edit, the verified cache `--adapter OWNER/NAME` loads from, and one-line
errors for what the hub or the checks refuse."""

from __future__ import annotations

import functools
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner, Result

from hub_client.adapters import cached_adapter, parse_adapter_ref
from hub_client.client import HubClient
from prime_cli.main import cli
from registry_index.peft_adapter import CONFIG, FILES, WEIGHTS
from tests.hub_server.adapters.test_adapters import lab_checkpoint
from tests.hub_server.inproc import InProcessHub
from tests.registry_index.adaptermaker import write_adapter


@pytest.fixture(scope="module")
def tokens(inproc_hub: InProcessHub) -> dict[str, str]:
    return {"cleo": inproc_hub.add_user("cleo"), "dara": inproc_hub.add_user("dara")}


@pytest.fixture
def prime(
    inproc_hub: InProcessHub, tokens: dict[str, str], monkeypatch: pytest.MonkeyPatch
) -> Callable[..., Result]:
    """Run `prime ARGS…` in-process against the inproc_hub, as `cleo` unless `as_user` says."""
    monkeypatch.setenv("PRIME_HUB_URL", inproc_hub.url)
    in_process = functools.partialmethod(HubClient.__init__, transport=inproc_hub.transport)
    monkeypatch.setattr(HubClient, "__init__", in_process)

    def run(*args: str, as_user: str | None = "cleo") -> Result:
        if as_user is None:
            monkeypatch.delenv("PRIME_API_KEY", raising=False)
        else:
            monkeypatch.setenv("PRIME_API_KEY", tokens[as_user])
        return CliRunner().invoke(cli, list(args))

    return run


def ok_json(result: Result) -> Any:
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


def one_line_error(result: Result, message: str) -> None:
    assert result.exit_code == 1 and "Traceback" not in result.output, result.output
    [line] = result.output.strip().splitlines()
    assert line.startswith("Error: ") and message in line, line


def test_push_list_info_pull_edit(prime: Callable[..., Result], tmp_path: Path) -> None:
    source = write_adapter(tmp_path / "trained", rank=8)
    pushed = ok_json(prime("adapter", "push", str(source), "tiny-lora", "--output", "json"))
    assert (pushed["owner"], pushed["name"], pushed["version"]) == ("cleo", "tiny-lora", "1")
    assert pushed["visibility"] == "private" and pushed["rank"] == 8
    text = prime("adapter", "push", str(source), "cleo/tiny-lora", "--version", "1.5")
    assert text.exit_code == 0 and "Pushed cleo/tiny-lora@1.5 (private;" in text.output
    assert "--adapter cleo/tiny-lora@1.5" in text.output

    listed = ok_json(prime("adapter", "list", "cleo", "--output", "json"))
    assert [(a["name"], a["latest_version"]) for a in listed["data"]] == [("tiny-lora", "1.5")]
    assert ok_json(prime("adapter", "list", "cleo", "--output", "json", as_user="dara")) == {
        "data": [],
        "total_count": 0,
        "page": 1,
        "per_page": 20,
    }
    info = ok_json(prime("adapter", "info", "cleo/tiny-lora", "--output", "json"))
    assert [v["version"] for v in info["versions"]] == ["1.5", "1"]

    pulled = ok_json(
        prime("adapter", "pull", "cleo/tiny-lora@1", str(tmp_path / "got"), "--output", "json")
    )
    assert pulled["version"] == "1"
    for name in FILES:
        assert (tmp_path / "got" / name).read_bytes() == (source / name).read_bytes()
    cwd = tmp_path / "cwd"
    cwd.mkdir()
    with pytest.MonkeyPatch.context() as patch:
        patch.chdir(cwd)
        assert prime("adapter", "pull", "cleo/tiny-lora").exit_code == 0
    assert sorted(p.name for p in (cwd / "tiny-lora-1.5").iterdir()) == sorted(FILES)

    one_line_error(prime("adapter", "pull", "cleo/tiny-lora", as_user="dara"), "not found")
    one_line_error(prime("adapter", "pull", "cleo/tiny-lora", as_user=None), "not found")
    one_line_error(
        prime("adapter", "pull", "cleo/tiny-lora", str(tmp_path / "got")), "is not an empty"
    )
    assert prime("adapter", "edit", "cleo/tiny-lora", "--public").exit_code == 0
    anonymous = prime("adapter", "pull", "cleo/tiny-lora@1", str(tmp_path / "anon"), as_user=None)
    assert anonymous.exit_code == 0, anonymous.output
    assert (tmp_path / "anon" / WEIGHTS).read_bytes() == (source / WEIGHTS).read_bytes()


def test_what_is_refused_is_one_line(prime: Callable[..., Result], tmp_path: Path) -> None:
    source = write_adapter(tmp_path / "a")
    (source / WEIGHTS).write_bytes(b"\x00" * 16)
    one_line_error(prime("adapter", "push", str(source), "broken"), "0-byte header")  # unsent
    (source / WEIGHTS).unlink()
    one_line_error(prime("adapter", "push", str(source), "broken"), "lacks adapter_model")
    good = write_adapter(tmp_path / "b", base_model=None)
    one_line_error(prime("adapter", "push", str(good), "x"), "--base-model")
    one_line_error(prime("adapter", "push", str(good), "dara/x", "--base-model", "m"), "not found")
    versioned = prime("adapter", "push", str(good), "x", "--version", "v-one", "--base-model", "m")
    one_line_error(versioned, "not a version")
    one_line_error(prime("adapter", "push", str(good), "x", as_user=None), "needs a token")
    assert prime("adapter", "push", str(good), "x@1").exit_code == 2  # --version, not '@'
    assert prime("adapter", "edit", "cleo/x").exit_code == 2  # nothing to change


def test_lab_publish_copies_ones_own_checkpoint(
    inproc_hub: InProcessHub, prime: Callable[..., Result], tmp_path: Path
) -> None:
    source = write_adapter(tmp_path / "lab")
    files = {name: (source / name).read_bytes() for name in FILES}
    path = lab_checkpoint(inproc_hub, "cleo", "step-8", files)
    published = ok_json(prime("lab", "publish", path, "from-lab", "--public", "--output", "json"))
    assert (published["version"], published["visibility"]) == ("1", "public")
    pulled = prime("adapter", "pull", "cleo/from-lab", str(tmp_path / "out"), as_user="dara")
    assert pulled.exit_code == 0
    assert all((tmp_path / "out" / n).read_bytes() == files[n] for n in FILES)
    one_line_error(prime("lab", "publish", path, "mine", as_user="dara"), "No checkpoint")


def test_the_cache_is_verified_and_refilled(
    inproc_hub: InProcessHub, tokens: dict[str, str], tmp_path: Path, prime: Callable[..., Result]
) -> None:
    source = write_adapter(tmp_path / "c", seed=5)
    assert prime("adapter", "push", str(source), "cached").exit_code == 0
    ref = parse_adapter_ref("cleo/cached")
    with HubClient(inproc_hub.url, tokens["cleo"], transport=inproc_hub.transport) as client:
        directory, version = cached_adapter(client, ref)
        assert (
            version.version == "1"
            and (directory / CONFIG).read_bytes() == (source / CONFIG).read_bytes()
        )
        (directory / WEIGHTS).write_bytes(b"tampered")
        again, _ = cached_adapter(client, ref)
    assert again == directory
    assert (directory / WEIGHTS).read_bytes() == (source / WEIGHTS).read_bytes()
