"""The hub's pages in real headless Chromium (Debian's, driven by Playwright) against a real hub
process: sign in, search and tags, the environment page and a pasted install command that works
in a fresh virtualenv, dark mode and 390 px layouts without page overflow. Each test saves
screenshots under outputs/screenshots/ (kept out of git)."""

from __future__ import annotations

import os
import shlex
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.hub_server.eval_push import push_eval
from tests.hub_server.hubproc import HubProcess, start_hub
from tests.hub_server.wheels import twine_upload
from tests.support import require

SHOTS = Path(__file__).resolve().parents[3] / "outputs" / "screenshots"
BIN = Path(sys.executable).parent
README = """# Tiny maths

Add two numbers. A wide table to check small screens:

| column one | column two | column three | column four | column five | column six | column seven |
|---|---|---|---|---|---|---|
| a long cell value | another long cell value | more | and more | and more still | x | y |

- [x] scored by exact match
- [ ] multi-turn

```python
def load_environment():
    return "ok"
```
"""


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[HubProcess, dict[str, str]]]:
    with start_hub(
        tmp_path_factory.mktemp("browser-hub"), {"PRIME_HUB_UPLOADS_PER_MINUTE": "10000"}
    ) as hub:
        tokens = {"alice": hub.add_user("alice"), "bob": hub.add_user("bob")}
        twine_upload(
            hub.url,
            tokens["alice"],
            "alice",
            "tiny-maths",
            "1.0.0",
            module_source=(
                "def load_environment(difficulty: int = 1):\n"
                '    """Tiny maths.\n\n    Args:\n        difficulty: How hard the sums are.\n    """\n'
                "    return 'tiny maths loaded'\n"
            ),
            summary="Add two numbers",
            extra_metadata=(
                "Requires-Dist: prime-envhub-sdk",
                "Keywords: maths,single-turn",
                "License: MIT",
                "Description-Content-Type: text/markdown",
            ),
            description=README,
        )
        twine_upload(hub.url, tokens["bob"], "bob", "word-game", "0.1.0", summary="Guess words",
                extra_metadata=("Keywords: game",))  # fmt: skip
        twine_upload(hub.url, tokens["alice"], "alice", "secret-env", "0.1.0", summary="Hidden")
        response = httpx.patch(
            f"{hub.url}/api/v1/environmentshub/alice/secret-env",
            headers={"Authorization": f"Bearer {tokens['alice']}"},
            json={"visibility": "private"},
        )
        assert response.status_code == 200, response.text
        yield hub, tokens


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    chromium = shutil.which("chromium") or "/usr/bin/chromium"
    require(Path(chromium).exists(), "Debian's chromium")
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        require(False, "playwright (Python package)")
    with sync_playwright() as playwright:
        launched = playwright.chromium.launch(
            executable_path=chromium,
            args=["--no-sandbox", "--disable-background-networking", "--disable-gpu"],
        )
        try:
            yield launched
        finally:
            launched.close()


# What sticks out past the viewport, for the failure message.
WIDE_ELEMENTS = """() => [...document.querySelectorAll('body *')]
  .filter(e => e.getBoundingClientRect().right > window.innerWidth + 1)
  .slice(0, 8)
  .map(e => `${e.tagName}.${e.className} ${Math.round(e.getBoundingClientRect().right)}px`)
  .join(', ')"""


def shot(page: Any, name: str) -> None:
    SHOTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(SHOTS / f"{name}.png"), full_page=True)


def test_sign_in_shows_the_owner_a_private_environment(
    site: tuple[HubProcess, dict[str, str]], browser: Any
) -> None:
    hub, tokens = site
    page = browser.new_page()
    try:
        page.goto(f"{hub.url}/alice/secret-env")
        assert "Not found" in page.locator("h1").inner_text()
        page.click("text=Sign in")
        page.fill("#token", tokens["alice"])
        page.click("form.stack button[type=submit]")
        page.wait_for_url(f"{hub.url}/alice/secret-env")
        assert "secret-env" in page.locator("h1").inner_text()
        assert page.locator(".badge", has_text="private").is_visible()
        shot(page, "signed-in-private-env")
        page.click("text=Sign out")
        page.goto(f"{hub.url}/alice/secret-env")
        assert "Not found" in page.locator("h1").inner_text()
    finally:
        page.close()


def test_search_and_tags_combine(site: tuple[HubProcess, dict[str, str]], browser: Any) -> None:
    hub, _ = site
    page = browser.new_page()
    try:
        page.goto(f"{hub.url}/")
        assert page.locator(".card").count() == 2  # the private one is not listed
        page.fill("#filter-q", "numbers")
        page.click("form.filters button[type=submit]")
        page.wait_for_url("**/?q=numbers*")
        assert page.locator(".card-title").all_inner_texts() == ["alice/tiny-maths"]
        page.click(".card .tag >> text=maths")
        assert page.locator(".card-title").all_inner_texts() == ["alice/tiny-maths"]
        assert page.locator(".chip", has_text="maths").is_visible()
        shot(page, "search-and-tag")
        page.click("text=Clear all")
        assert page.locator(".card").count() == 2
        page.goto(f"{hub.url}/?q=nothing-like-this")
        assert "No environments match" in page.locator(".empty").inner_text()
    finally:
        page.close()


def test_environment_page_and_its_copied_install_command_work(
    site: tuple[HubProcess, dict[str, str]], browser: Any, tmp_path: Path
) -> None:
    hub, _ = site
    context = browser.new_context()
    context.grant_permissions(["clipboard-read", "clipboard-write"], origin=hub.url)
    page = context.new_page()
    try:
        page.goto(f"{hub.url}/alice/tiny-maths")
        readme = page.locator("section.readme")
        assert readme.locator("table").count() == 1
        assert readme.locator("input[type=checkbox]").count() == 2
        assert readme.locator("pre span").count() > 0  # highlighted code
        assert "MIT" in page.locator("dl.facts").inner_text()
        args = page.locator("table.args tbody tr").first.inner_text()
        assert "difficulty" in args and "How hard the sums are." in args
        assert "prime-envhub-sdk" in page.locator("dl.facts").inner_text()
        files = page.locator("ul.files li")
        assert files.count() == 1 and "sha256" in files.first.inner_text()
        assert page.locator("ul.versions a").all_inner_texts() == ["1.0.0"]
        page.click("button[data-copy=cmd-uv]")
        from playwright.sync_api import expect  # a locator assertion: the CSP refuses string eval

        expect(page.locator("button[data-copy=cmd-uv]")).to_have_text("Copied")
        command = page.evaluate("navigator.clipboard.readText()")
        shot(page, "environment-page")
    finally:
        context.close()
    assert command.startswith("uv pip install ")
    venv = tmp_path / "venv"
    subprocess.run([str(BIN / "uv"), "venv", "--python", sys.executable, str(venv)], check=True,
                   capture_output=True)  # fmt: skip
    argv = shlex.split(command)
    argv[0] = str(BIN / "uv")
    env = {**os.environ, "VIRTUAL_ENV": str(venv)}
    env.pop("UV_INDEX_URL", None)
    result = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=600, check=False)
    assert result.returncode == 0, result.stderr
    python = venv / "bin" / "python"
    loaded = subprocess.run(
        [str(python), "-c", "import tiny_maths; print(tiny_maths.load_environment())"],
        capture_output=True, text=True, check=True,
    )  # fmt: skip
    assert loaded.stdout.strip() == "tiny maths loaded"
    listed = subprocess.run(
        [str(BIN / "uv"), "pip", "list", "--python", str(python)],
        capture_output=True, text=True, check=True,
    ).stdout.lower()  # fmt: skip
    assert "prime-envhub-sdk" in listed
    for heavy in ("fastapi", "sqlmodel", "alembic", "twine", "uvicorn", "torch"):
        assert heavy not in listed, heavy


@pytest.mark.parametrize("scheme", ["light", "dark"])
def test_small_screens_do_not_scroll_sideways(
    site: tuple[HubProcess, dict[str, str]], browser: Any, scheme: str
) -> None:
    hub, _ = site
    context = browser.new_context(viewport={"width": 390, "height": 844}, color_scheme=scheme)
    page = context.new_page()
    try:
        for path, name in (
            ("/", "home"),
            ("/alice/tiny-maths", "environment"),
            ("/login", "login"),
        ):
            page.goto(f"{hub.url}{path}")
            width = page.evaluate("document.documentElement.scrollWidth")
            assert width <= 390, (
                f"{path} is {width} px wide at 390 px ({scheme}): " + page.evaluate(WIDE_ELEMENTS)
            )
            shot(page, f"{name}-390-{scheme}")
        background = page.evaluate("getComputedStyle(document.body).backgroundColor")
        assert (background == "rgb(13, 17, 23)") == (scheme == "dark"), background
    finally:
        context.close()


def _push_run(
    hub: HubProcess, token: str, model: str, rewards: list[float | None], *, batch: int = 5000
) -> str:
    """Create → push in batches → finalize, as `prime eval push` does; None = errored."""
    run = {
        "name": f"tiny-maths--{model}",
        "environments": [{"slug": "alice/tiny-maths"}],
        "model_name": model,
        "is_public": True,
    }
    samples = [
        {
            "example_index": i // 4,
            "rollout_index": i % 4,
            "reward": reward,
            "prompt": [{"role": "user", "content": f"What is {i // 4} + 1?"}],
            "completion": [{"role": "assistant", "content": f"{i // 4 + 1}"}],
            "error": None if reward is not None else {"type": "Timeout", "message": "took 60 s"},
        }
        for i, reward in enumerate(rewards)
    ]
    with httpx.Client(base_url=hub.url, timeout=120) as http:
        return push_eval(http, token, run, samples, batch=batch)


def test_leaderboard_ranks_and_marks_ties_after_pushes(
    site: tuple[HubProcess, dict[str, str]], browser: Any
) -> None:
    hub, tokens = site
    _push_run(hub, tokens["alice"], "strong-model", [1.0] * 36 + [0.0] * 4)
    _push_run(hub, tokens["bob"], "close-model", [1.0] * 34 + [0.0] * 6)
    _push_run(hub, tokens["alice"], "weak-model", [0.0] * 36 + [1.0] * 4)
    page = browser.new_page()
    try:
        page.goto(f"{hub.url}/alice/tiny-maths")
        rows = page.locator("table.leaderboard tbody tr")
        assert rows.count() == 3
        texts = [rows.nth(i).inner_text() for i in range(3)]
        assert "strong-model" in texts[0] and "close-model" in texts[1] and "weak-model" in texts[2]
        # 0.90 and 0.85 over 10 examples: the 95% intervals overlap, so both rank 1, tied
        ranks = [t.split()[0] for t in texts]
        assert [r.removesuffix("tied") for r in ranks] == ["1", "1", "3"], ranks
        assert "tied" in texts[0] and "tied" in texts[1] and "tied" not in texts[2]
        assert "third-party" in texts[1]  # bob pushed on alice's environment
        assert page.locator("figure svg circle").count() == 3
        shot(page, "leaderboard")
        page.check("input[name=lb_first_party]")
        page.click("form.filters button[type=submit] >> nth=0")
        assert page.locator("table.leaderboard tbody tr").count() == 2
    finally:
        page.close()


@pytest.mark.slow
def test_samples_viewer_pages_a_100k_run_and_filters_by_reward(
    site: tuple[HubProcess, dict[str, str]], browser: Any
) -> None:
    hub, tokens = site
    rewards: list[float | None] = [
        None if i % 1000 == 999 else (i % 10) / 10 for i in range(100_000)
    ]
    run_id = _push_run(hub, tokens["alice"], "big-model", rewards)
    page = browser.new_page()
    try:
        page.goto(f"{hub.url}/alice/tiny-maths/evals/{run_id}", timeout=120_000)
        heading = page.locator("#samples").inner_text()
        assert "100000 matching of 100000" in heading
        assert page.locator("article.sample").count() == 20
        page.click("text=Next →")
        assert "Page 2 of 5000" in page.locator(".pager").inner_text()
        page.fill("#reward-min", "0.9")
        page.click("form[aria-label='Filter samples'] button[type=submit]")
        assert "9900 matching" in page.locator("#samples").inner_text()
        shown = page.locator("article.sample header").all_inner_texts()
        assert len(shown) == 20 and all("reward 0.900" in text for text in shown)
        page.select_option("#error", "Timeout")
        page.fill("#reward-min", "")
        page.click("form[aria-label='Filter samples'] button[type=submit]")
        assert "100 matching" in page.locator("#samples").inner_text()
        shot(page, "samples-viewer")
    finally:
        page.close()
