"""Issue 26, class 9: a hostile module in a wheel (a 150,000-term expression) made the
environment page 500 on every view: the signature parser's RecursionError escaped, and the
failure was not cached, so each view parsed again. Now the page answers, without the
arguments table, and the wheel is parsed once."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from hub_server.web import environment_pages
from tests.hub_server.hardening_hub import HardenedHub
from tests.hub_server.wheels import twine_upload_form, wheel_bytes

HOSTILE = "X = " + "+".join(["1"] * 150_000) + "\n\ndef load_environment(n: int = 1):\n    pass\n"


def test_a_hostile_module_never_500s_the_environment_page_and_is_parsed_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    hub = HardenedHub(tmp_path)
    parsed: list[Any] = []
    real = environment_pages.read_env_signature

    def counting(wheel: Any) -> Any:
        parsed.append(wheel)
        return real(wheel)

    monkeypatch.setattr(environment_pages, "read_env_signature", counting)
    with hub.client() as client:
        fields, files = twine_upload_form(
            "wordle", "0.2.0", wheel_bytes("wordle", "0.2.0", module_source=HOSTILE)
        )
        uploaded = client.post(
            "/alice/legacy/", auth=("__token__", hub.tokens["alice"]), data=fields, files=files
        )
        assert uploaded.status_code == 200, uploaded.text
        for path in ("/alice/wordle", "/alice/wordle", "/alice/wordle/v/0.2.0"):
            page = client.get(path)
            assert page.status_code == 200, page.text[-500:]
            assert "Environment arguments" not in page.text
    assert len(parsed) == 1
