"""Simple repository API pages: PEP 503 HTML and PEP 691 JSON from the same data.

Includes sha256 hashes, `requires-python`, yanking (PEP 592), core metadata (PEP 658/714),
`size`, `upload-time` and `versions` (PEP 700), at api-version 1.1. Pages are built by string
joins and the stdlib JSON encoder rather than templates because these are the hottest
responses of an index: pip and uv fetch one per requirement on every install.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from functools import lru_cache
from html import escape
from typing import Literal

from packaging.utils import (
    InvalidSdistFilename,
    InvalidWheelFilename,
    parse_sdist_filename,
    parse_wheel_filename,
)
from packaging.version import Version

from registry_index.names import normalize

API_VERSION = "1.1"
# A PEP 503-normalised name needs neither normalising nor HTML/JSON escaping.
_is_normalized = re.compile(r"[a-z0-9]+(?:-[a-z0-9]+)*").fullmatch
CONTENT_TYPE_JSON = "application/vnd.pypi.simple.v1+json"
CONTENT_TYPE_HTML = "application/vnd.pypi.simple.v1+html"
CONTENT_TYPE_TEXT_HTML = "text/html"
Format = Literal["html", "json"]

# Media types a client may ask for, mapped to (format, the Content-Type we answer with).
# The `latest` aliases MUST be answered with the concrete v1 type (PEP 691).
_MEDIA_TYPES: dict[str, tuple[Format, str]] = {
    CONTENT_TYPE_JSON: ("json", CONTENT_TYPE_JSON),
    "application/vnd.pypi.simple.latest+json": ("json", CONTENT_TYPE_JSON),
    CONTENT_TYPE_HTML: ("html", CONTENT_TYPE_HTML),
    "application/vnd.pypi.simple.latest+html": ("html", CONTENT_TYPE_HTML),
    CONTENT_TYPE_TEXT_HTML: ("html", "text/html; charset=utf-8"),
    "text/*": ("html", "text/html; charset=utf-8"),
    "*/*": ("html", "text/html; charset=utf-8"),
}


@dataclass(frozen=True, slots=True)
class ProjectFile:
    """One downloadable file of a project, as the simple index lists it."""

    filename: str
    url: str
    sha256: str
    size: int
    upload_time: datetime
    requires_python: str | None = None
    yanked: bool | str = False  # True, or the reason string
    core_metadata_sha256: str | None = None


def _q_value(params: list[str]) -> float:
    for param in params:
        key, _, value = param.strip().partition("=")
        if key.strip().lower() == "q":
            try:
                return max(0.0, min(1.0, float(value.strip())))
            except ValueError:
                return 0.0
    return 1.0


def negotiate(accept_header: str | None) -> tuple[Format, str] | None:
    """(format, response Content-Type) for an `Accept` header, or None for 406.

    Highest q wins; ties go to the type the client listed first. A missing or empty header
    means `*/*` (HTML, the PEP 503 default).
    """
    if accept_header is None or not accept_header.strip():
        return _MEDIA_TYPES["*/*"]
    best: tuple[float, int, tuple[Format, str]] | None = None
    for index, item in enumerate(accept_header.split(",")):
        media, *params = item.split(";")
        choice = _MEDIA_TYPES.get(media.strip().lower())
        if choice is None:
            continue
        quality = _q_value(params)
        if quality <= 0.0:
            continue
        if best is None or quality > best[0]:
            best = (quality, index, choice)
    return best[2] if best is not None else None


def negotiate_format(accept_header: str | None) -> Format | None:
    """PEP 691 content negotiation: "html", "json", or None (the caller answers 406)."""
    chosen = negotiate(accept_header)
    return chosen[0] if chosen is not None else None


def format_upload_time(moment: datetime) -> str:
    """PEP 700 `upload-time`: ISO 8601 UTC with microseconds and a `Z` (naive means UTC)."""
    if moment.tzinfo is not None:
        moment = moment.astimezone(UTC).replace(tzinfo=None)
    return moment.isoformat(timespec="microseconds") + "Z"


@lru_cache(maxsize=65_536)
def _parse_version(text: str) -> Version:
    """Versions repeat on every page render; parsing them is the costly part of sorting."""
    return Version(text)


@lru_cache(maxsize=65_536)
def version_of(filename: str) -> Version | None:
    """The version encoded in a distribution filename, or None when it cannot be parsed."""
    try:
        if filename.endswith(".whl"):
            return parse_wheel_filename(filename)[1]
        return parse_sdist_filename(filename)[1]
    except (InvalidWheelFilename, InvalidSdistFilename):
        return None


def _versions(files: Sequence[ProjectFile], versions: Iterable[str] | None) -> list[str]:
    if versions is not None:
        return sorted(set(versions), key=_parse_version)
    found = {v for f in files if (v := version_of(f.filename)) is not None}
    return [str(v) for v in sorted(found)]


def _html_file(file: ProjectFile) -> str:
    parts = ['<a href="', escape(file.url, quote=True), "#sha256=", file.sha256, '"']
    if file.requires_python:
        parts += [' data-requires-python="', escape(file.requires_python, quote=True), '"']
    if file.yanked is not False:
        reason = file.yanked if isinstance(file.yanked, str) else ""
        parts += [' data-yanked="', escape(reason, quote=True), '"']
    if file.core_metadata_sha256:
        meta = f'"sha256={file.core_metadata_sha256}"'
        parts += [" data-core-metadata=", meta, " data-dist-info-metadata=", meta]
    parts += [">", escape(file.filename, quote=False), "</a><br>\n"]
    return "".join(parts)


def _json_file(file: ProjectFile) -> dict[str, object]:
    core: dict[str, str] | bool = (
        {"sha256": file.core_metadata_sha256} if file.core_metadata_sha256 else False
    )
    entry: dict[str, object] = {
        "filename": file.filename,
        "url": file.url,
        "hashes": {"sha256": file.sha256},
        "requires-python": file.requires_python,
        "core-metadata": core,
        "dist-info-metadata": core,
        # PEP 691: a reason must be a non-empty string; an empty reason is plain `true`.
        "yanked": file.yanked if file.yanked != "" else True,
        "size": file.size,
        "upload-time": format_upload_time(file.upload_time),
    }
    return entry


def render_project_page(
    name: str,
    files: Sequence[ProjectFile],
    fmt: Format,
    versions: Iterable[str] | None = None,
) -> str:
    """The detail page of one project; `versions` defaults to those found in the filenames."""
    normalized = normalize(name)
    if fmt == "json":
        page = {
            "meta": {"api-version": API_VERSION},
            "name": normalized,
            "versions": _versions(files, versions),
            "files": [_json_file(file) for file in files],
        }
        return json.dumps(page, separators=(",", ":"))
    title = escape(normalized, quote=False)
    head = (
        "<!DOCTYPE html>\n<html>\n<head>\n"
        f'<meta name="pypi:repository-version" content="{API_VERSION}">\n'
        f"<title>Links for {title}</title>\n</head>\n<body>\n<h1>Links for {title}</h1>\n"
    )
    return head + "".join(_html_file(file) for file in files) + "</body>\n</html>\n"


def _index_link(project: str) -> str:
    if _is_normalized(project):  # the common case: nothing to normalise or escape
        return f'<a href="{project}/">{project}</a><br>\n'
    href = escape(normalize(project), quote=True)
    return f'<a href="{href}/">{escape(project, quote=False)}</a><br>\n'


def _index_entry(project: str) -> str:
    if _is_normalized(project):
        return f'{{"name":"{project}"}}'
    return json.dumps({"name": project}, separators=(",", ":"))


def render_index_page(project_names: Iterable[str], fmt: Format) -> str:
    """The root page listing every project (names as given; links use the normal form)."""
    if fmt == "json":
        entries = ",".join(_index_entry(project) for project in project_names)
        return f'{{"meta":{{"api-version":"{API_VERSION}"}},"projects":[{entries}]}}'
    return (
        "<!DOCTYPE html>\n<html>\n<head>\n"
        f'<meta name="pypi:repository-version" content="{API_VERSION}">\n'
        "<title>Simple index</title>\n</head>\n<body>\n"
        + "".join(_index_link(project) for project in project_names)
        + "</body>\n</html>\n"
    )
