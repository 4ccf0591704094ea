"""wiki-search: answer questions by searching a corpus with tools (agentic search).

The model gets `search_pages(query)`, `view_sections(page_id)` and `read_section(section_id)`
over a BM25 index and must find the fact a question asks for. The default corpus is real
Wikipedia text available offline; pass `corpus=` (a directory of Markdown/text files, a JSONL
file, or a local `datasets` dataset) and `questions=` to make it search your own documents.
`tools="mcp"` serves the same tools from an MCP server (mcp_server.py, one per run) instead of
in-process functions.
Its reference policy (`wiki_search.reference`) answers every question through the tools, so
`prime eval validate` also checks that a custom corpus answers its questions.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable
from functools import lru_cache
from pathlib import Path
from typing import Any

from prime_env import (
    Environment,
    JudgeRubric,
    MCPTools,
    ModelClient,
    Reference,
    Rubric,
    State,
    ToolLoop,
    XMLParser,
)

from .corpus import Corpus, load_corpus
from .questions import load_questions, normalize
from .reference import solve
from .search import SEARCH_RESULTS, SNIPPET_CHARS, SearchIndex, make_tools

__all__ = [
    "PARSER",
    "Corpus",
    "SearchIndex",
    "load_corpus",
    "load_environment",
    "make_tools",
    "normalize",
]

PARSER = XMLParser(fields=("answer",), answer_field="answer")

SYSTEM_PROMPT = """You answer questions using a searchable wiki. Tools:
- search_pages(query): find pages (returns page_id, title, snippet)
- view_sections(page_id): list a page's sections (returns section_id, heading)
- read_section(section_id): read a section's full text
Search, read the relevant section, then reply with the answer only, as <answer>...</answer>."""

JUDGE_CRITERION = "Does the model's response give the same answer as the reference answer?"


def exact_match(completion: list[dict[str, Any]], answer: str) -> float:
    """1.0 when the <answer> equals the reference after normalisation (case, punctuation, articles)."""
    parsed = PARSER.parse_answer(completion)
    return 1.0 if parsed is not None and normalize(parsed) == normalize(str(answer)) else 0.0


def tool_calls(state: State) -> float:
    return float(state.get("tool_calls", 0))


def read_the_source(state: State, info: dict[str, Any]) -> float:
    """1.0 when the model read the section the question was made from (shipped questions only)."""
    wanted = info.get("section_id")
    if not wanted:
        return 0.0
    for message in state.completion:
        for call in message.get("tool_calls") or []:
            function = call.get("function") or {}
            if function.get("name") == "read_section" and wanted in (
                function.get("arguments") or ""
            ):
                return 1.0
    return 0.0


@lru_cache(maxsize=4)
def _index_for(corpus: Corpus) -> SearchIndex:
    # Building the BM25 index takes seconds on the default corpus; share it between loads.
    return SearchIndex(corpus)


def _judge_client(judge: str | ModelClient) -> ModelClient:
    if not isinstance(judge, str):
        return judge
    from prime_env.clients.model_specs import resolve_model

    return resolve_model(judge).create_client()


def _mcp_server(corpus: Any, search_results: int, snippet_chars: int) -> MCPTools:
    """The tools' MCP server, one per run: this interpreter, with this package importable."""
    here = str(Path(__file__).resolve().parents[1])
    path = os.pathsep.join(p for p in (here, os.environ.get("PYTHONPATH", "")) if p)
    argv = [sys.executable, "-m", "wiki_search.mcp_server", "--search-results", str(search_results)]
    argv += ["--snippet-chars", str(snippet_chars)]
    if corpus is not None:
        argv += ["--corpus", os.fspath(corpus)]
    return MCPTools(argv, env={"PYTHONPATH": path}, name="wiki-search")


def load_environment(
    corpus: Any = None,
    questions: str | None = None,
    max_turns: int = 8,
    num_eval_examples: int = 100,
    judge: str | ModelClient | None = None,
    seed: int = 0,
    tools: str = "python",
    search_results: int = SEARCH_RESULTS,
    snippet_chars: int = SNIPPET_CHARS,
) -> Environment:
    """`corpus`: None (Wikipedia Vital Articles), a directory, a .jsonl file or a datasets Dataset.
    `questions`: a .jsonl/.json/.csv of {question, answer}; required with a custom corpus.
    `judge`: a model name (e.g. "openai/gpt-4.1-mini") or ModelClient; when given, the reward is
    the judge's verdict and exact match becomes a metric.
    `tools`: "python" (in-process functions) or "mcp" (the same tools from an MCP server; needs
    the `mcp` extra, and `corpus` as a path).
    `search_results`, `snippet_chars`: how many hits a search lists and how much of each page
    it shows (fewer tokens per turn, for a small model's context and a CPU trainer).
    """
    if tools not in ("python", "mcp"):
        raise ValueError(f'tools must be "python" or "mcp", got {tools!r}')
    if tools == "mcp" and corpus is not None and not isinstance(corpus, (str, os.PathLike)):
        raise ValueError('tools="mcp" needs corpus as a path (the server loads it itself)')
    if corpus is not None and questions is None:
        raise ValueError(
            "a custom corpus needs its own questions: pass questions=<file.jsonl with question and answer fields>"
        )
    if max_turns < 2:
        raise ValueError(f"max_turns must be at least 2 (search, then answer), got {max_turns}")
    if search_results < 1 or snippet_chars < 0:
        raise ValueError(
            f"search_results must be at least 1 and snippet_chars at least 0, got "
            f"{search_results} and {snippet_chars}"
        )
    loaded = load_corpus(corpus)
    tasks = load_questions(questions)
    if not 1 <= num_eval_examples < len(tasks):
        raise ValueError(
            f"num_eval_examples must be between 1 and {len(tasks) - 1}, got {num_eval_examples}"
        )
    train, evals = tasks.split(eval_size=num_eval_examples, seed=seed)
    metrics: list[Callable[..., Any]] = [tool_calls, read_the_source, PARSER.format_reward]
    if judge is None:
        rubric: Rubric = Rubric([exact_match], metrics=metrics, parser=PARSER)
    else:
        rubric = JudgeRubric(
            _judge_client(judge),
            {"judge_correct": JUDGE_CRITERION},
            metrics=[exact_match, *metrics],
            parser=PARSER,
        )
    if tools == "mcp":
        harness = ToolLoop(
            mcp=[_mcp_server(corpus, search_results, snippet_chars)],
            max_turns=max_turns,
            system_prompt=SYSTEM_PROMPT,
        )
    else:
        harness = ToolLoop(
            make_tools(_index_for(loaded), search_results, snippet_chars),
            max_turns=max_turns,
            system_prompt=SYSTEM_PROMPT,
        )
    correctness = "exact_match" if judge is None else "judge_correct"
    return Environment(
        train,
        harness,
        rubric,
        name="wiki-search",
        eval_tasks=evals,
        reference=Reference(solve, min_reward=1.0),
        correctness=correctness,
    )
