"""wiki-search: corpus loaders, BM25 tools, question answerability, oracle/anti-oracle runs."""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest
from wiki_search import load_corpus, load_environment, make_tools
from wiki_search.corpus import default_corpus, split_markdown
from wiki_search.questions import BLANK, default_questions
from wiki_search.reference import solve
from wiki_search.search import SearchIndex

from prime_env import ReferenceClient, run_rollouts, summarize
from prime_env.chat_template import assistant_message, template_messages
from prime_env.reference_check import validate_reference
from tests.builtin_envs.policy import PolicyClient, mean_reward, tool_call


@pytest.fixture(scope="module")
def index() -> SearchIndex:
    return SearchIndex(default_corpus())


@pytest.fixture
def handbook(tmp_path: Path) -> tuple[Path, Path]:
    """A company's own corpus (a folder of Markdown and text, nested) and its questions file."""
    docs = tmp_path / "handbook"
    (docs / "policies").mkdir(parents=True)
    (docs / "policies" / "travel.md").write_text(
        "# Travel policy\nBook through the portal.\n\n## Per diem\nThe daily meal allowance is 45 euros.\n\n"
        "## Flights\nEconomy class for flights under 6 hours.\n"
    )
    (docs / "onboarding.txt").write_text("New starters get a laptop on their first day.\n")
    questions = tmp_path / "questions.jsonl"
    questions.write_text(
        json.dumps({"question": "What is the daily meal allowance?", "answer": "45 euros"})
        + "\n"
        + json.dumps({"question": "What do new starters get on day one?", "answer": "a laptop"})
        + "\n"
    )
    return docs, questions


def test_default_corpus_is_the_vital_articles(index: SearchIndex) -> None:
    corpus = default_corpus()
    assert len(corpus) > 9000
    page = corpus.pages["2001_a_space_odyssey"]
    assert page.title == "2001: A Space Odyssey" and "Stanley Kubrick" in page.sections[0].text
    assert index.search("Kubrick science fiction film 1968", 3)[0][0] == "2001_a_space_odyssey"


def test_every_question_is_answerable_from_the_corpus_with_the_tools(index: SearchIndex) -> None:
    """For all shipped questions: the answer is in the cited section, the cloze is that sentence
    with the answer blanked, and search_pages on the question lists the source page, even
    with the 3 hits of 100 characters that the SmolLM2 recipe sets."""
    corpus = index.corpus
    search_pages, _, read_section = make_tools(index, results=3, snippet_chars=100)
    rows = default_questions()
    assert len(rows) >= 300 and len({r["id"] for r in rows}) == len(rows)
    unreachable = []
    for row in rows:
        text = read_section(row["section_id"])
        assert row["sentence"] in text and row["answer"] in row["sentence"]
        cloze = row["question"].split('"', 1)[1].rsplit('"', 1)[0]
        assert cloze.replace(BLANK, row["answer"]) == row["sentence"]
        assert row["section_id"].startswith(row["page_id"] + ":") and row["page_id"] in corpus.pages
        listed = json.loads(search_pages(cloze))
        assert len(listed) <= 3 and all(len(hit["snippet"]) <= 100 for hit in listed)
        hits = [hit["page_id"] for hit in listed]
        if row["page_id"] not in hits:
            unreachable.append(row["id"])
    assert unreachable == []


def test_tools_explain_bad_ids(index: SearchIndex) -> None:
    search_pages, view_sections, read_section = make_tools(index)
    with pytest.raises(
        ValueError, match="no page with page_id 'nope'; use a page_id from search_pages"
    ):
        view_sections("nope")
    with pytest.raises(ValueError, match="use a section_id from view_sections"):
        read_section("nope:0")
    with pytest.raises(ValueError, match="the query is empty"):
        search_pages("   ")
    assert search_pages("qqqzzzxxv") == "No pages matched; try other keywords."


async def test_the_shipped_reference_answers_through_real_tool_calls() -> None:
    report = await validate_reference(load_environment())
    records = report.records
    assert report.passed and report.errors == 0 and len(records) == 100
    assert all(r.metrics["tool_calls"] == 3 and r.metrics["read_the_source"] for r in records)
    tool_names = [m["name"] for m in records[0].completion if m["role"] == "tool"]
    assert tool_names == ["search_pages", "view_sections", "read_section"]
    assert records[0].tools is not None and len(records[0].tools) == 3


async def test_the_reference_writes_its_calls_in_the_local_models_text_form() -> None:
    """What it writes is what SmolLM2 is prompted to write and what local_model parses."""
    env = load_environment(num_eval_examples=1)
    [task] = env.get_eval_tasks()
    state = env.harness.start(task)
    state["tools"] = env.harness.tool_specs
    text = solve(state.prompt, state)
    assert text.startswith('<tool_call>{"name": "search_pages", "arguments": {"query": ')
    assert template_messages([assistant_message(text, lambda: "call_0")]) == [
        {"role": "assistant", "content": text}
    ]


async def test_the_reference_searches_in_rank_order_on_a_custom_corpus(
    tmp_path: Path, handbook: tuple[Path, Path]
) -> None:
    docs, questions = handbook
    env = load_environment(corpus=str(docs), questions=str(questions), num_eval_examples=1)
    report = await validate_reference(env)
    assert report.passed, report.shortfalls
    unanswerable = tmp_path / "unanswerable.jsonl"
    unanswerable.write_text(
        questions.read_text().replace("45 euros", "50 euros").replace("a laptop", "a phone")
    )
    env = load_environment(corpus=str(docs), questions=str(unanswerable), num_eval_examples=1)
    assert not (await validate_reference(env)).passed


async def test_guessing_without_tools_and_empty_policies_score_low() -> None:
    env = load_environment()
    rng = random.Random(0)
    assert await mean_reward(env, lambda m: f"<answer>{rng.randint(1500, 2020)}</answer>", 50) < 0.1
    assert await mean_reward(env, lambda m: "", 20) == 0.0


async def test_a_company_corpus_as_a_template(handbook: tuple[Path, Path]) -> None:
    docs, questions = handbook
    corpus = load_corpus(docs)
    assert sorted(corpus.pages) == ["onboarding", "travel_policy"]
    assert [s.heading for s in corpus.pages["travel_policy"].sections] == [
        "Introduction",
        "Per diem",
        "Flights",
    ]
    env = load_environment(corpus=str(docs), questions=str(questions), num_eval_examples=1)

    def policy(messages: list[dict]) -> dict | str:
        meal = "allowance" in next(m["content"] for m in messages if m["role"] == "user")
        tools = [m for m in messages if m["role"] == "tool"]
        if not tools:
            return tool_call(
                "search_pages", "c1", query="daily meal allowance" if meal else "new starters"
            )
        if len(tools) == 1:
            top = json.loads(tools[0]["content"])[0]["page_id"]
            assert top == ("travel_policy" if meal else "onboarding")
            return tool_call(
                "read_section", "c2", section_id="travel_policy:1" if meal else "onboarding:0"
            )
        return (
            "<answer>45 Euros.</answer>"
            if "45 euros" in tools[-1]["content"]
            else "<answer>A laptop</answer>"
        )

    records = await run_rollouts(env, PolicyClient(policy), n=1)
    assert records[0].reward == 1.0, records[0]


def test_jsonl_and_dataset_corpora(tmp_path: Path) -> None:
    rows = [
        {"title": "Alpha", "text": "First page.\n## Details\nMore about alpha."},
        {"title": "Beta", "text": "Second."},
    ]
    jsonl = tmp_path / "pages.jsonl"
    jsonl.write_text("\n".join(json.dumps(r) for r in rows))
    corpus = load_corpus(jsonl)
    assert [s.id for s in corpus.pages["alpha"].sections] == ["alpha:0", "alpha:1"]
    import datasets  # the [datasets] extra, part of the test install

    saved = tmp_path / "saved"
    datasets.Dataset.from_list(rows).save_to_disk(str(saved))
    assert sorted(load_corpus(saved).pages) == ["alpha", "beta"]
    assert sorted(load_corpus(datasets.Dataset.from_list(rows)).pages) == ["alpha", "beta"]


def test_markdown_splitting_keeps_text_before_the_first_heading() -> None:
    title, sections = split_markdown("# Title\nLead.\n## A\nx\n### B\ny", "fallback")
    assert title == "Title" and sections == [("Introduction", "Lead."), ("A", "x"), ("B", "y")]


def test_bad_corpus_and_arguments_are_rejected_clearly(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="a custom corpus needs its own questions"):
        load_environment(corpus=str(tmp_path))
    with pytest.raises(ValueError, match="does not exist"):
        load_corpus(tmp_path / "missing")
    with pytest.raises(ValueError, match="no Markdown or text files"):
        load_corpus(tmp_path)
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"title": "x"}\n')
    with pytest.raises(ValueError, match="row 0: needs string 'title' and 'text'"):
        load_corpus(bad)
    with pytest.raises(ValueError, match="max_turns must be at least 2"):
        load_environment(max_turns=1)
    with pytest.raises(ValueError, match="search_results must be at least 1"):
        load_environment(search_results=0)


async def test_judge_rubric_scores_with_the_judge_and_keeps_exact_match_as_a_metric() -> None:
    def judge_policy(messages: list[dict]) -> str:
        prompt = messages[-1]["content"]
        reference = prompt.split("Reference answer (may be empty):\n", 1)[1].split("\n", 1)[0]
        response = prompt.split("Model's response:\n", 1)[1].split("\n\nQuestion:", 1)[0]
        return "yes" if reference and reference in response else "no"

    judge = PolicyClient(judge_policy, model="judge")
    env = load_environment(judge=judge)
    records = await run_rollouts(env, ReferenceClient(env), n=10)
    assert summarize(records).reward_mean >= 0.99 and judge.calls == 10
    assert all(
        r.rewards == {"judge_correct": 1.0} and r.metrics["exact_match"] == 1.0 for r in records
    )
    assert await mean_reward(env, lambda m: "<answer>1066</answer>", 10) <= 0.1


async def test_the_same_tools_served_over_mcp() -> None:
    """tools="mcp": the reference policy validates unchanged through the MCP server (the tools
    offered are the server's, listing as many hits as `search_results` says), and a bad id's
    message reaches the model from there as well."""
    env = load_environment(tools="mcp", num_eval_examples=10, search_results=2)
    report = await validate_reference(env)
    assert report.passed and report.errors == 0 and len(report.records) == 10, report.shortfalls
    records = report.records
    assert [m["name"] for m in records[0].completion if m["role"] == "tool"] == [
        "search_pages",
        "view_sections",
        "read_section",
    ]
    first_search = next(m["content"] for m in records[0].completion if m["role"] == "tool")
    assert len(json.loads(first_search)) == 2
    assert records[0].tools is not None
    assert sorted(t["function"]["name"] for t in records[0].tools) == [
        "read_section",
        "search_pages",
        "view_sections",
    ]

    def bad_id(messages: list[dict]) -> dict | str:
        if messages[-1]["role"] == "tool":
            return f"<answer>{messages[-1]['content']}</answer>"
        return tool_call("view_sections", "c1", page_id="nope")

    [record] = await run_rollouts(env, PolicyClient(bad_id), n=1)
    assert record.error is None
    assert (
        "no page with page_id 'nope'; use a page_id from search_pages"
        in (record.completion[1]["content"])
    )
    with pytest.raises(ValueError, match='tools must be "python" or "mcp"'):
        load_environment(tools="grpc")
