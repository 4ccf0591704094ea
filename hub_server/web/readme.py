"""What a version's METADATA shows on its page: the README rendered by its content type, the
dependencies, Requires-Python, license and keywords.

READMEs go through PyPI's own renderer (`readme_renderer`): Markdown (GFM by default, with
tables and task lists; CommonMark when the variant says so), reStructuredText, or plain text,
each with Pygments highlighting and sanitised by nh3 before anything is marked safe. The
`Description-Content-Type` decides, as on PyPI: a missing one means reStructuredText, and a
README that is not valid reStructuredText is shown as plain text rather than not at all.
A README longer than `MAX_README_CHARS` is rendered up to there, with a note: the page stays
small whatever was uploaded.
"""

from __future__ import annotations

import threading
import warnings
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass, field
from email.message import Message

from markupsafe import Markup

from registry_index.errors import InvalidUpload
from registry_index.metadata import parse_core_metadata

with warnings.catch_warnings():  # readme_renderer warns at import when an optional renderer is gone
    warnings.simplefilter("ignore")
    import readme_renderer.markdown
    import readme_renderer.rst
    import readme_renderer.txt


MAX_README_CHARS = 256 * 1024


@dataclass(frozen=True)
class VersionMetadata:
    readme: Markup | None
    requires_dist: list[str] = field(default_factory=list)
    requires_python: str | None = None
    license: str | None = None
    keywords: list[str] = field(default_factory=list)


def _content_type(value: str | None) -> tuple[str, dict[str, str]]:
    message = Message()
    message["content-type"] = value or "text/x-rst"
    params = {k.lower(): v for k, v in message.get_params(failobj=[])[1:]}
    return message.get_content_type(), params


def render_readme(text: str | None, content_type: str | None) -> Markup | None:
    """`text` as sanitised HTML by its Description-Content-Type, or None when empty."""
    if not text or not text.strip():
        return None
    cut = len(text) - MAX_README_CHARS
    if cut > 0:
        text = text[:MAX_README_CHARS]
    kind, params = _content_type(content_type)
    html: str | None = None
    if kind == "text/markdown":
        variant = params.get("variant", "GFM")
        html = readme_renderer.markdown.render(
            text, variant="CommonMark" if variant.lower() == "commonmark" else "GFM"
        )
    elif kind == "text/x-rst":
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            html = readme_renderer.rst.render(text, stream=None)
    if html is None:  # text/plain, an unknown type, or reStructuredText that does not parse
        html = readme_renderer.txt.render(text)
    if cut > 0:
        html = f'{html}<p class="muted small">The README is cut here: {cut} more characters.</p>'
    return Markup(html)  # safe: readme_renderer sanitises its output with nh3; the note is ours


class MetadataCache:
    """Rendered version metadata by METADATA sha256 (immutable, so never stale), least
    recently used out. Holds rendered HTML and short fields, never the raw METADATA bytes."""

    def __init__(self, size: int) -> None:
        self._size = size
        self._items: OrderedDict[str, VersionMetadata | None] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, sha256: str, load: Callable[[], bytes]) -> VersionMetadata | None:
        with self._lock:
            if sha256 in self._items:
                self._items.move_to_end(sha256)
                return self._items[sha256]
        try:
            meta = parse_core_metadata(load(), "METADATA")
            shown: VersionMetadata | None = VersionMetadata(
                readme=render_readme(meta.description, meta.description_content_type),
                requires_dist=list(meta.requires_dist),
                requires_python=meta.requires_python,
                license=meta.license,
                keywords=list(meta.keywords),
            )
        except InvalidUpload:
            shown = None
        with self._lock:
            self._items[sha256] = shown
            while len(self._items) > self._size:
                self._items.popitem(last=False)
        return shown
