"""Simple-index pages, checked with pip's own page parser and against PEP 691/700 keys."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta, timezone

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pip._internal.index.collector import IndexContent, parse_links

from registry_index.simple import (
    CONTENT_TYPE_HTML,
    CONTENT_TYPE_JSON,
    ProjectFile,
    format_upload_time,
    negotiate,
    negotiate_format,
    render_index_page,
    render_project_page,
)

SHA = "a" * 64
META = "b" * 64
UPLOADED = datetime(2026, 3, 1, 12, 30, 5, 123456, tzinfo=UTC)
FILES = [
    ProjectFile(
        "demo_env-1.0.0-py3-none-any.whl", "../../files/x/demo_env-1.0.0-py3-none-any.whl",
        SHA, 1234, UPLOADED, ">=3.9,<4", False, META,
    ),
    ProjectFile(
        "demo_env-1.1.0-py3-none-any.whl", "/files/y/demo_env-1.1.0-py3-none-any.whl",
        SHA, 2048, UPLOADED, None, "broken \"build\" <oops>", None,
    ),
    ProjectFile(
        "demo_env-1.1.0.tar.gz", "/files/z/demo_env-1.1.0.tar.gz", SHA, 999, UPLOADED, None, True,
    ),
]  # fmt: skip
PAGE_URL = "http://127.0.0.1:8000/alice/simple/demo-env/"


def _pip_links(body: str, content_type: str) -> dict[str, object]:
    page = IndexContent(body.encode(), content_type, "utf-8", PAGE_URL, cache_link_parsing=False)
    return {link.filename: link for link in parse_links(page)}


@pytest.mark.parametrize("fmt", ["html", "json"])
def test_pip_reads_both_formats_identically(fmt: str) -> None:
    body = render_project_page("Demo_Env", FILES, fmt)  # type: ignore[arg-type]
    content_type = CONTENT_TYPE_JSON if fmt == "json" else "text/html"
    links = _pip_links(body, content_type)
    assert list(links) == [f.filename for f in FILES]
    first, second, third = (links[f.filename] for f in FILES)
    wheel_url = "http://127.0.0.1:8000/alice/files/x/demo_env-1.0.0-py3-none-any.whl"
    assert first.url_without_fragment == wheel_url  # type: ignore[attr-defined]
    assert first._hashes == {"sha256": SHA}  # type: ignore[attr-defined]
    assert first.requires_python == ">=3.9,<4"  # type: ignore[attr-defined]
    assert first.yanked_reason is None  # type: ignore[attr-defined]
    assert first.metadata_file_data.hashes == {"sha256": META}  # type: ignore[attr-defined]
    assert second.yanked_reason == 'broken "build" <oops>'  # type: ignore[attr-defined]
    assert second.metadata_file_data is None  # type: ignore[attr-defined]
    assert third.yanked_reason == ""  # type: ignore[attr-defined]


def test_html_escapes_and_emits_both_metadata_attributes() -> None:
    body = render_project_page("demo-env", FILES, "html")
    assert 'data-requires-python="&gt;=3.9,&lt;4"' in body
    assert f'data-core-metadata="sha256={META}" data-dist-info-metadata="sha256={META}"' in body
    assert '<meta name="pypi:repository-version" content="1.1">' in body
    assert "<oops>" not in body


def test_json_has_every_pep_691_700_key() -> None:
    page = json.loads(render_project_page("Demo_Env", FILES, "json"))
    assert page["meta"] == {"api-version": "1.1"}
    assert page["name"] == "demo-env"
    assert page["versions"] == ["1.0.0", "1.1.0"]
    first = page["files"][0]
    assert set(first) >= {"filename", "url", "hashes", "requires-python", "core-metadata",
                          "dist-info-metadata", "yanked", "size", "upload-time"}  # fmt: skip
    assert first["hashes"] == {"sha256": SHA}
    assert first["core-metadata"] == first["dist-info-metadata"] == {"sha256": META}
    assert first["size"] == 1234 and first["yanked"] is False
    assert first["upload-time"] == "2026-03-01T12:30:05.123456Z"
    assert page["files"][1]["core-metadata"] is False
    assert page["files"][1]["yanked"] == 'broken "build" <oops>'
    assert page["files"][2]["yanked"] is True


def test_explicit_versions_list_includes_versions_without_files() -> None:
    page = json.loads(render_project_page("demo-env", FILES[:1], "json", versions=["2.0", "1.0.0"]))
    assert page["versions"] == ["1.0.0", "2.0"]


def test_index_page_both_formats() -> None:
    names = ["Demo_Env", "wordle"]
    html = render_index_page(names, "html")
    assert '<a href="demo-env/">Demo_Env</a>' in html
    assert json.loads(render_index_page(names, "json")) == {
        "meta": {"api-version": "1.1"},
        "projects": [{"name": "Demo_Env"}, {"name": "wordle"}],
    }


def test_upload_time_is_utc_with_z() -> None:
    east = datetime(2026, 3, 1, 14, 0, tzinfo=timezone(timedelta(hours=2)))
    assert format_upload_time(east) == "2026-03-01T12:00:00.000000Z"
    assert format_upload_time(datetime(2026, 3, 1, 12, 0)) == "2026-03-01T12:00:00.000000Z"


PIP = "application/vnd.pypi.simple.v1+json, application/vnd.pypi.simple.v1+html; q=0.1, text/html; q=0.01"
UV = "application/vnd.pypi.simple.v1+json, application/vnd.pypi.simple.v1+html;q=0.2, text/html;q=0.01"


@pytest.mark.parametrize(
    ("accept", "expected"),
    [
        (PIP, ("json", CONTENT_TYPE_JSON)),
        (UV, ("json", CONTENT_TYPE_JSON)),
        (None, ("html", "text/html; charset=utf-8")),
        ("", ("html", "text/html; charset=utf-8")),
        ("*/*", ("html", "text/html; charset=utf-8")),
        ("text/html", ("html", "text/html; charset=utf-8")),
        ("application/vnd.pypi.simple.v1+html", ("html", CONTENT_TYPE_HTML)),
        ("application/vnd.pypi.simple.latest+json", ("json", CONTENT_TYPE_JSON)),
        ("application/vnd.pypi.simple.latest+html", ("html", CONTENT_TYPE_HTML)),
        (
            "text/html;q=0.9, application/vnd.pypi.simple.v1+json;q=0.8",
            ("html", "text/html; charset=utf-8"),
        ),
        ("application/vnd.pypi.simple.v1+json;q=0.5, text/html;q=0.5", ("json", CONTENT_TYPE_JSON)),
        (
            "application/vnd.pypi.simple.v1+json;q=0, */*;q=0.1",
            ("html", "text/html; charset=utf-8"),
        ),
        ("application/json", None),
        ("application/vnd.pypi.simple.v2+json", None),
        ("text/html;q=0", None),
        ("text/html;q=abc", None),
    ],
)
def test_negotiation(accept: str | None, expected: tuple[str, str] | None) -> None:
    assert negotiate(accept) == expected
    assert negotiate_format(accept) == (expected[0] if expected else None)


def _project_file(minor: int, wheel: bool, base: str, **fields: object) -> ProjectFile:
    filename = f"demo_env-1.{minor}.0" + ("-py3-none-any.whl" if wheel else ".tar.gz")
    return ProjectFile(filename=filename, url=f"{base}/{filename}", **fields)  # type: ignore[arg-type]


_file = st.builds(
    _project_file,
    minor=st.integers(0, 50),
    wheel=st.booleans(),
    base=st.sampled_from(["/files/a", "../../files/b&c", "http://127.0.0.1:9/f/<z>"]),
    sha256=st.from_regex(r"\A[0-9a-f]{64}\Z"),
    size=st.integers(0, 2**40),
    upload_time=st.datetimes(timezones=st.just(UTC)),
    requires_python=st.sampled_from([None, ">=3.9", ">=3.8,<4", "!=3.0.*, >2.7"]),
    yanked=st.one_of(st.booleans(), st.text(max_size=20)),
    core_metadata_sha256=st.one_of(st.none(), st.from_regex(r"\A[0-9a-f]{64}\Z")),
)


def _summary(body: str, content_type: str) -> list[tuple[object, ...]]:
    page = IndexContent(body.encode(), content_type, "utf-8", PAGE_URL, cache_link_parsing=False)
    return [
        (
            link.filename,
            link.url_without_fragment,
            link.hash,
            link.requires_python,
            link.yanked_reason,
            link.metadata_file_data.hashes if link.metadata_file_data else None,
        )
        for link in parse_links(page)
    ]


@settings(max_examples=60, deadline=None)
@given(st.lists(_file, max_size=6, unique_by=lambda f: f.filename))
def test_html_and_json_say_the_same_to_pip(files: list[ProjectFile]) -> None:
    html = _summary(render_project_page("demo-env", files, "html"), "text/html")
    data = _summary(render_project_page("demo-env", files, "json"), CONTENT_TYPE_JSON)
    assert html == data
    assert [row[0] for row in html] == [f.filename for f in files]
