"""BM25 over page titles and text (bm25s: a sparse-matrix BM25, fast on CPU), plus the tools.

The index is built once per corpus and cached, so every rollout of an environment shares it.
"""

from __future__ import annotations

import json
from typing import Any

import bm25s
from bm25s.tokenization import Tokenizer

from .corpus import Corpus

SNIPPET_CHARS = 200
"""How much of each hit's text `search_pages` shows by default (`snippet_chars`)."""
SEARCH_RESULTS = 5


class SearchIndex:
    def __init__(self, corpus: Corpus) -> None:
        self.corpus = corpus
        self.page_ids = list(corpus.pages)
        self.tokenizer = Tokenizer(stopwords="en")
        # The title twice: a query naming the subject should find its page first.
        docs = [f"{p.title}\n{p.title}\n{p.text}" for p in corpus.pages.values()]
        tokens = self.tokenizer.tokenize(docs, show_progress=False, return_as="tuple")
        self.retriever = bm25s.BM25()
        self.retriever.index(tokens, show_progress=False)

    def search(self, query: str, k: int = 5) -> list[tuple[str, float]]:
        """(page_id, score) best first; empty when no query word is in the corpus."""
        tokens = self.tokenizer.tokenize(
            [query], update_vocab=False, show_progress=False, return_as="tuple"
        )
        if not any(tokens.ids[0]):
            return []
        k = min(k, len(self.page_ids))
        docs, scores = self.retriever.retrieve(tokens, k=k, show_progress=False)
        return [(self.page_ids[int(d)], float(s)) for d, s in zip(docs[0], scores[0]) if s > 0]


def make_tools(
    index: SearchIndex, results: int = SEARCH_RESULTS, snippet_chars: int = SNIPPET_CHARS
) -> list[Any]:
    """The three tools the model gets, bound to one index: `search_pages` lists up to `results`
    hits with the first `snippet_chars` characters of each (fewer tokens per search for a small
    model's context). Bad ids raise with a helpful message, which the ToolLoop returns to the
    model as the tool's reply."""
    corpus = index.corpus

    def search_pages(query: str) -> str:
        """Search the wiki for pages matching a query (BM25 over titles and text).

        Args:
            query: Keywords or a phrase to search for.

        Returns:
            A JSON list of the best pages: page_id, title and the start of the page.
        """
        if not query.strip():
            raise ValueError("the query is empty; search for some keywords")
        hits = []
        for page_id, _score in index.search(query, results):
            page = corpus.pages[page_id]
            hits.append(
                {"page_id": page_id, "title": page.title, "snippet": page.text[:snippet_chars]}
            )
        return json.dumps(hits) if hits else "No pages matched; try other keywords."

    def view_sections(page_id: str) -> str:
        """List the sections of a page.

        Args:
            page_id: A page_id returned by search_pages.

        Returns:
            A JSON list of the page's sections: section_id and heading.
        """
        page = corpus.pages.get(page_id)
        if page is None:
            raise ValueError(f"no page with page_id {page_id!r}; use a page_id from search_pages")
        return json.dumps([{"section_id": s.id, "heading": s.heading} for s in page.sections])

    def read_section(section_id: str) -> str:
        """Read the full text of one section.

        Args:
            section_id: A section_id returned by view_sections.

        Returns:
            The section's text.
        """
        section = corpus.sections.get(section_id)
        if section is None:
            raise ValueError(
                f"no section with section_id {section_id!r}; use a section_id from view_sections"
            )
        return section.text

    return [search_pages, view_sections, read_section]
