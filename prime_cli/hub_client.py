"""A small typed client of the hub's REST API (`docs/api.md`), shared by every `prime` command.

Every failure becomes a `HubError` whose message is one line that says what went wrong and how
to fix it (unreachable hub, bad token, no such environment, version not found), so commands can
print it and exit non-zero instead of showing a traceback. Uploads and downloads stream with a
rich progress bar on stderr and verify sizes and sha256 digests.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any, Self
from urllib.parse import quote, urljoin, urlsplit

import httpx
from rich.console import Console
from rich.progress import (
    BarColumn,
    DownloadColumn,
    Progress,
    TextColumn,
    TimeRemainingColumn,
    TransferSpeedColumn,
)

from prime_cli.config import Settings, load_settings

API_PREFIX = "/api/v1"
CHUNK = 256 * 1024


class HubError(Exception):
    """A hub request that failed; the message is meant for the user, on one line."""

    def __init__(self, message: str, status: int | None = None) -> None:
        super().__init__(message)
        self.status = status


class NotFound(HubError):
    """The hub answered 404 (no such environment, version or file, or not visible to you)."""


def _progress(console: Console) -> Progress:
    return Progress(
        TextColumn("{task.description}"),
        BarColumn(),
        DownloadColumn(),
        TransferSpeedColumn(),
        TimeRemainingColumn(),
        console=console,
        transient=True,
        disable=not console.is_terminal,  # no bar noise in logs and pipes
    )


def _detail(response: httpx.Response) -> str:
    """The server's error text: FastAPI's `detail`, else the body, else the reason phrase."""
    try:
        body = response.json()
    except ValueError:
        text = response.text.strip()
        return text.splitlines()[0][:300] if text else response.reason_phrase
    if isinstance(body, dict):
        detail = body.get("detail", body.get("message", body.get("error")))
        if isinstance(detail, list):  # FastAPI validation errors
            return "; ".join(
                f"{'.'.join(str(p) for p in item.get('loc', [])[1:])}: {item.get('msg')}"
                for item in detail
                if isinstance(item, dict)
            )
        if detail is not None:
            return str(detail)
    return response.reason_phrase


class HubClient:
    """Talks to one hub with one (optional) token; use as a context manager or call close()."""

    def __init__(
        self,
        base_url: str,
        api_key: str | None = None,
        *,
        timeout: float = 30.0,
        console: Console | None = None,
        transport: httpx.BaseTransport | None = None,
    ) -> None:
        self.base_url = base_url.rstrip("/")
        self.api_key = api_key
        self.console = console or Console(stderr=True)
        headers = {"User-Agent": "prime-envhub-cli"}
        if api_key:
            headers["Authorization"] = f"Bearer {api_key}"
        self._http = httpx.Client(
            base_url=self.base_url,
            headers=headers,
            timeout=httpx.Timeout(timeout, connect=10.0),
            transport=transport,
            follow_redirects=False,
        )

    @classmethod
    def from_settings(cls, settings: Settings | None = None, **kwargs: Any) -> HubClient:
        settings = settings or load_settings()
        return cls(settings.hub_url, settings.api_key, **kwargs)

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        self._http.close()

    # ----------------------------------------------------------------- plumbing

    def _absolute(self, url: str) -> str:
        return urljoin(self.base_url + "/", url)

    def _same_origin(self, url: str) -> bool:
        """Only send our token back to the hub itself, never to a presigned storage URL."""
        a, b = urlsplit(self.base_url), urlsplit(self._absolute(url))
        return (a.scheme, a.netloc) == (b.scheme, b.netloc)

    def _unreachable(self, exc: httpx.HTTPError) -> HubError:
        reason = str(exc) or type(exc).__name__
        return HubError(
            f"cannot reach the hub at {self.base_url}: {reason}; is it running? "
            "set PRIME_HUB_URL or run `prime login --url URL`"
        )

    def _check(self, response: httpx.Response, what: str) -> httpx.Response:
        if response.is_success:
            return response
        status, detail = response.status_code, _detail(response)
        if status == 401:
            hint = (
                "run `prime login --url URL --token TOKEN` or set PRIME_API_KEY"
                if not self.api_key
                else "the token is invalid, expired or revoked; create a new one and run "
                "`prime login` (or set PRIME_API_KEY)"
            )
            raise HubError(f"{what}: not authenticated ({detail}); {hint}", status)
        if status == 403:
            raise HubError(f"{what}: permission denied ({detail})", status)
        if status == 404:
            raise NotFound(f"{what}: {detail}", status)
        if status == 429:
            raise HubError(f"{what}: rate limited by the hub ({detail}); retry later", status)
        if status >= 500:
            raise HubError(f"{what}: the hub failed with HTTP {status} ({detail})", status)
        raise HubError(f"{what}: {detail}", status)

    def request(
        self,
        method: str,
        path: str,
        what: str,
        *,
        json: Any = None,
        params: Mapping[str, Any] | None = None,
    ) -> Any:
        """Call `API_PREFIX + path` and return the decoded JSON body (None when empty)."""
        try:
            response = self._http.request(method, API_PREFIX + path, json=json, params=params)
        except httpx.HTTPError as exc:
            raise self._unreachable(exc) from exc
        self._check(response, what)
        if not response.content:
            return None
        try:
            return response.json()
        except ValueError as exc:
            raise HubError(
                f"{what}: the server at {self.base_url} did not answer with JSON; "
                "is PRIME_HUB_URL pointing at a prime hub?"
            ) from exc

    def data(
        self,
        method: str,
        path: str,
        what: str,
        *,
        json: Any = None,
        params: Mapping[str, Any] | None = None,
    ) -> Any:
        """Like `request`, but return the `data` member of the hub's `{"data": …}` envelope."""
        body = self.request(method, path, what, json=json, params=params)
        if not isinstance(body, dict) or "data" not in body:
            raise HubError(
                f"{what}: unexpected answer from {self.base_url} (no 'data' member); "
                "is PRIME_HUB_URL pointing at a prime hub?"
            )
        return body["data"]

    # ----------------------------------------------------------------- transfers

    def upload(self, url: str, path: Path, *, label: str | None = None) -> None:
        """PUT the file at `path` to an upload URL (the hub's own, or a presigned S3 URL)."""
        size = path.stat().st_size
        target = self._absolute(url)
        headers = {"Content-Length": str(size), "Content-Type": "application/octet-stream"}
        with _progress(self.console) as progress:
            task = progress.add_task(label or f"upload {path.name}", total=size)

            def chunks() -> Iterator[bytes]:
                with path.open("rb") as handle:
                    while block := handle.read(CHUNK):
                        progress.update(task, advance=len(block))
                        yield block

            try:
                request = self._http.build_request("PUT", target, content=chunks(), headers=headers)
                if not self._same_origin(url):  # never leak the token to presigned storage
                    request.headers.pop("Authorization", None)
                response = self._http.send(request)
            except httpx.HTTPError as exc:
                raise self._unreachable(exc) from exc
        self._check(response, f"upload of {path.name}")

    def download(
        self, url: str, dest: Path, *, sha256: str | None = None, label: str | None = None
    ) -> Path:
        """Stream `url` to `dest` (atomically), checking the sha256 when one is given."""
        target = self._absolute(url)
        dest.parent.mkdir(parents=True, exist_ok=True)
        partial = dest.with_name(dest.name + ".part")
        digest = hashlib.sha256()
        try:
            request = self._http.build_request("GET", target)
            if not self._same_origin(url):
                request.headers.pop("Authorization", None)
            response = self._http.send(request, stream=True)
        except httpx.HTTPError as exc:
            raise self._unreachable(exc) from exc
        try:
            if not response.is_success:
                response.read()
                self._check(response, f"download of {dest.name}")
            total = int(response.headers.get("Content-Length", 0)) or None
            with _progress(self.console) as progress, partial.open("wb") as handle:
                task = progress.add_task(label or f"download {dest.name}", total=total)
                for block in response.iter_bytes(CHUNK):
                    handle.write(block)
                    digest.update(block)
                    progress.update(task, advance=len(block))
        except httpx.HTTPError as exc:
            partial.unlink(missing_ok=True)
            raise self._unreachable(exc) from exc
        except BaseException:
            partial.unlink(missing_ok=True)
            raise
        finally:
            response.close()
        if sha256 and digest.hexdigest() != sha256.lower():
            partial.unlink(missing_ok=True)
            raise HubError(
                f"download of {dest.name}: sha256 mismatch (expected {sha256}, "
                f"got {digest.hexdigest()}); the file was not kept"
            )
        partial.replace(dest)
        return dest


def env_path(owner: str, name: str) -> str:
    """The REST path of one environment."""
    return f"/environmentshub/{quote(owner, safe='')}/{quote(name, safe='')}"
