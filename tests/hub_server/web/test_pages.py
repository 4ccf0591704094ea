"""Web pages, rendered by the hub in-process: listing and search, environment pages (README,
versions, install lines, leaderboard), run pages, owner pages, privacy, escaping. The real
browser against a real server is test_browser.py."""

from __future__ import annotations

import re
from collections.abc import Iterator

import pytest

from tests.hub_server.evals.test_evaluations import RunningHub

XSS_MODEL = '<img src=x onerror="alert(1)">'
RECIPE = "reverse_text/train/smollm2-135m.toml"
RECIPE_TEXT = b'max_steps = 40\n[orchestrator]\nbatch_size = 32  # "<b>4 x 8</b>"\n'


def populate(hub: RunningHub) -> dict[str, str]:
    """Environments of alice, bob and acme (one private) and four finished runs."""
    hub.upload("alice", "alice", "wordle", "0.1.0", summary="Play wordle")
    hub.upload("alice", "alice", "wordle", "0.2.0", summary="Play wordle")
    hub.set_env(
        "alice",
        "alice",
        "wordle",
        tags=["game", "multi-turn"],
        description="Guess the word <b>fast</b>",
    )
    hub.upload(
        "bob",
        "bob",
        "reverse-text",
        "1.0.0",
        summary="Reverse a string",
        extra={RECIPE: RECIPE_TEXT},
    )
    hub.upload("alice", "acme", "secret", "1.0.0", summary="A private one")
    hub.set_env("alice", "acme", "secret", visibility="private")
    return {
        "big": hub.run_eval(
            "alice", "alice/wordle", "openai/gpt-4.1-mini", [1.0, 1.0, 0.0, 1.0, None]
        ),
        "small": hub.run_eval("bob", "alice/wordle", "local/smollm2-135m", [0.0, 1.0, 0.0, 0.0]),
        "xss": hub.run_eval("bob", "alice/wordle", XSS_MODEL, [0.0]),
        "secret": hub.run_eval("alice", "acme/secret", "secret-model", [1.0]),
    }


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[RunningHub, dict[str, str]]]:
    """The pages in-process: what they say is route logic."""
    hub = RunningHub(tmp_path_factory.mktemp("web-hub"))
    try:
        yield hub, populate(hub)
    finally:
        hub.close()


def text_of(html: str) -> str:
    return re.sub(r"\s+", " ", re.sub(r"<[^>]+>", " ", html))


def test_home_lists_public_environments_with_search_and_tags(
    site: tuple[RunningHub, dict[str, str]],
) -> None:
    hub, _ = site
    page = hub.get("/")
    assert page.status_code == 200 and page.headers["content-type"].startswith("text/html")
    assert 'href="/alice/wordle"' in page.text and 'href="/bob/reverse-text"' in page.text
    assert "acme/secret" not in page.text
    shown = text_of(page.text)
    assert (
        "v0.2.0" in shown
        and "game" in shown
        and "multi-turn" in shown
        and "2 environments" in shown
    )
    assert "Guess the word &lt;b&gt;fast&lt;/b&gt;" in page.text  # descriptions are escaped
    found = hub.get("/", params={"q": "REVERSE"}).text
    assert "bob/reverse-text" in found and "alice/wordle" not in found
    tagged = hub.get("/", params={"tag": "game"}).text
    assert "alice/wordle" in tagged and "bob/reverse-text" not in tagged
    assert "No environments match" in hub.get("/", params={"q": "no-such-thing"}).text
    assert "acme/secret" in hub.get("/", "alice").text  # a reader with access sees private ones


def test_environment_page_shows_readme_install_versions_and_leaderboard(
    site: tuple[RunningHub, dict[str, str]],
) -> None:
    hub, runs = site
    page = hub.get("/alice/wordle")
    assert page.status_code == 200
    html = page.text
    assert re.search(r"<h1[^>]*>Wordle<", html)
    assert "<strong>hidden word</strong>" in html and "<table>" in html
    assert "<script>alert" not in html and "&lt;script&gt;" in html  # README HTML is not rendered
    assert 'href="javascript:' not in html
    assert "prime env install alice/wordle" in html
    assert (
        f"uv pip install --index-strategy first-index --index {hub.url}/alice/simple/ "
        f"--index {hub.url}/_sdk/simple/ "
        "wordle==0.2.0" in html
    )
    shown = text_of(html)
    assert "0.2.0" in shown and "0.1.0" in shown
    table = html.split('class="leaderboard"')[1].split("</table>")[0]
    rows = re.findall(r"<tr[^>]*>(.*?)</tr>", table, re.DOTALL)
    cells = [text_of(row).replace(" tied ", " ").split() for row in rows[1:]]
    # best first; the errored rollout of the first run is excluded (3 of 4 scored = 0.75), counted apart
    assert cells[0][:4] == ["1", "openai/gpt-4.1-mini", "0.750", "0.250"]
    assert cells[0][6:9] == ["4", "4", "1"] and "0.2.0" in cells[0]
    # 0.75 ± 0.25 and 0.25 ± 0.25 over 4 examples: the 95% intervals overlap, so both rank 1
    assert cells[1][:3] == ["1", "local/smollm2-135m", "0.250"]
    assert 'class="tied"' in table and "<svg" in html  # marked as tied; the chart is drawn
    assert f'href="/alice/wordle/evals/{runs["big"]}"' in html
    assert XSS_MODEL not in html and "&lt;img src=x onerror=" in html


def test_environment_page_shows_the_recipes_its_wheel_ships(
    site: tuple[RunningHub, dict[str, str]],
) -> None:
    hub, _ = site
    html = hub.get("/bob/reverse-text").text
    assert "Training recipes" in html and "<code>smollm2-135m</code>" in html
    assert RECIPE in html and "max_steps = 40" in html
    assert "&lt;b&gt;4 x 8&lt;/b&gt;" in html and "<b>4 x 8</b>" not in html  # escaped
    assert "Training recipes" not in hub.get("/alice/wordle").text  # none shipped: no section


def test_run_page_shows_summary_and_first_samples(site: tuple[RunningHub, dict[str, str]]) -> None:
    hub, runs = site
    page = hub.get(f"/alice/wordle/evals/{runs['big']}")
    assert page.status_code == 200
    shown = text_of(page.text)
    assert "openai/gpt-4.1-mini" in shown and "alice/wordle@0.2.0" in shown and "completed" in shown
    assert "0.750 ± 0.250" in shown
    assert (
        "example 4 · rollout 0" in shown
        and "error: RateLimitError" in shown
        and "429 after 5 retries" in shown
    )
    assert "q0" in shown and "a0" in shown
    assert (
        hub.get(f"/bob/reverse-text/evals/{runs['big']}").status_code == 404
    )  # not this env's run


def test_an_open_run_page_shows_no_score_yet(site: tuple[RunningHub, dict[str, str]]) -> None:
    hub, _ = site
    evaluation_id = hub.create_eval(
        "bob", "alice/wordle", "still-running", name="open run", is_public=True
    )
    shown = text_of(hub.get(f"/alice/wordle/evals/{evaluation_id}").text)
    assert "running" in shown and "Mean reward —" in shown.replace("MEAN REWARD", "Mean reward")
    assert "still-running" not in hub.get("/api/v1/environmentshub/alice/wordle/leaderboard").text


def test_private_environment_pages_are_404_to_others(
    site: tuple[RunningHub, dict[str, str]],
) -> None:
    hub, runs = site
    for who in (None, "bob"):
        for path in ("/acme/secret", f"/acme/secret/evals/{runs['secret']}"):
            page = hub.get(path, who)
            assert page.status_code == 404 and "acme/secret not found" in page.text
        assert "secret" not in hub.get("/acme", who).text.split("<main>")[1]
    assert hub.get("/acme/secret", "alice").status_code == 200
    assert "secret-model" in hub.get("/acme/secret", "alice").text


def test_owner_pages_and_unknown_paths(site: tuple[RunningHub, dict[str, str]]) -> None:
    hub, _ = site
    owner = hub.get("/alice")
    assert owner.status_code == 200 and 'href="/alice/wordle"' in owner.text
    assert "Member of" in owner.text and 'href="/acme"' in owner.text
    org = hub.get("/acme").text
    assert "organisation" in org and "Members" in org and 'href="/alice"' in org
    assert hub.get("/nobody").status_code == 404
    assert hub.get("/alice/nope").status_code == 404
    redirect = hub.http.get("/alice/simple", follow_redirects=False)
    assert redirect.status_code == 301 and redirect.headers["location"] == "/alice/simple/"
    assert hub.get("/static/hub.css").headers["content-type"].startswith("text/css")
    assert hub.get("/static/..%2Fweb.py").status_code == 404


def test_pages_do_not_shadow_index_files_of_a_project_named_evals(
    site: tuple[RunningHub, dict[str, str]],
) -> None:
    """`/{owner}/files/evals/{file}` is a download, though it has the shape of a run page URL."""
    hub, _ = site
    hub.upload("bob", "bob", "evals", "0.1.0", summary="named like the run pages")
    for method in ("GET", "HEAD"):
        response = hub.http.request(method, "/bob/files/evals/evals-0.1.0-py3-none-any.whl")
        assert response.status_code == 200, response.text
        assert not response.headers["content-type"].startswith("text/html")
    assert hub.get("/bob/evals").status_code == 200
