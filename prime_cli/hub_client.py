"""A small typed client of the hub's REST API (`docs/api.md`), shared by every `prime` command.

Every failure becomes a `HubError` whose message is one line that says what went wrong and how
to fix it (unreachable hub, bad token, no such environment, version not found), so commands can
print it and exit non-zero instead of showing a traceback. Uploads and downloads stream with a
rich progress bar on stderr and verify sizes and sha256 digests.

Requests are retried (tenacity: exponential backoff with full jitter, never sooner than the
hub's `Retry-After` in either of its forms) when a retry cannot duplicate anything: idempotent
methods after a transport error, a 429 or a 502/503/504; any method when the connection was
never made (a hub restarting) or the hub refused it with 429/503. Downloads follow the hub's
redirects to presigned storage URLs; the token is only ever sent to the hub's own origin.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Self
from urllib.parse import quote, urljoin, urlsplit

import httpx
import tenacity
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
IDEMPOTENT = frozenset({"GET", "HEAD", "PUT", "DELETE", "OPTIONS"})
RETRY_STATUSES = frozenset({429, 502, 503, 504})
NEVER_PROCESSED = frozenset({429, 503})  # the hub refused before doing anything: any method
MAX_REDIRECTS = 5


class HubError(Exception):
    """A hub request that failed; the message is meant for the user, on one line."""

    def __init__(self, message: str, status: int | None = None) -> None:
        super().__init__(message)
        self.status = status


class NotFound(HubError):
    """The hub answered 404 (no such environment, version or file, or not visible to you)."""


class _RetryableStatus(Exception):
    """A response worth another attempt; carries it so the last one can still be reported."""

    def __init__(self, response: httpx.Response) -> None:
        # The one Retry-After parser (both RFC 9110 forms); imported here, on the rare retry,
        # because importing prime_env costs every `prime` command about half a second.
        from prime_env.clients.retry import retry_after_seconds

        super().__init__(f"HTTP {response.status_code}")
        self.response = response
        self.retry_after = retry_after_seconds(response.headers.get("Retry-After"))


@dataclass(frozen=True)
class RetryPolicy:
    """How hard to try: attempts include the first; delays are seconds."""

    max_attempts: int = 30
    max_elapsed_s: float = 120.0  # once the hub has answered: long enough for it to restart
    first_contact_attempts: int = 3  # a hub that never answered is likely down or mistyped
    base_delay_s: float = 0.5
    max_delay_s: float = 15.0
    max_retry_after_s: float = 60.0  # a longer Retry-After is honoured up to this per wait


def _retryable(method: str, idempotent: bool | None) -> Callable[[BaseException], bool]:
    if idempotent is None:
        idempotent = method.upper() in IDEMPOTENT

    def check(exc: BaseException) -> bool:
        if isinstance(exc, _RetryableStatus):
            status = exc.response.status_code
            return status in NEVER_PROCESSED or (idempotent and status in RETRY_STATUSES)
        if isinstance(exc, httpx.ConnectError | httpx.ConnectTimeout):
            return True  # the request never reached the hub
        return idempotent and isinstance(exc, httpx.TransportError)

    return check


def _wait(policy: RetryPolicy) -> Callable[[tenacity.RetryCallState], float]:
    jitter = tenacity.wait_random_exponential(
        multiplier=policy.base_delay_s, max=policy.max_delay_s
    )

    def wait(state: tenacity.RetryCallState) -> float:
        delay = jitter(state)
        exc = state.outcome.exception() if state.outcome else None
        if isinstance(exc, _RetryableStatus) and exc.retry_after is not None:
            delay = max(delay, min(exc.retry_after, policy.max_retry_after_s))
        return delay

    return wait


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
        retry: RetryPolicy | None = None,
    ) -> None:
        self.base_url = base_url.rstrip("/")
        self.api_key = api_key
        self.console = console or Console(stderr=True)
        self.retry = retry or RetryPolicy()
        self._answered = False  # has the hub (or storage) answered this client yet?
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

    def _retrying(self, method: str, what: str, idempotent: bool | None) -> tenacity.Retrying:
        """The retry loop for one logical request; its last failure is re-raised as is."""
        policy = self.retry

        def attempts() -> int:
            return policy.max_attempts if self._answered else policy.first_contact_attempts

        def announce(state: tenacity.RetryCallState) -> None:
            exc = state.outcome.exception() if state.outcome else None
            reason = str(exc) or type(exc).__name__
            delay = state.next_action.sleep if state.next_action else 0.0
            self.console.print(  # one line whatever the width, so logs and tests can skip it
                f"[yellow]{what}: {reason}; retrying in {delay:.1f} s "
                f"(attempt {state.attempt_number + 1} of {attempts()})[/]",
                soft_wrap=True,
            )

        def stop(state: tenacity.RetryCallState) -> bool:
            return (
                state.attempt_number >= attempts()
                or state.seconds_since_start is not None
                and state.seconds_since_start >= policy.max_elapsed_s
            )

        return tenacity.Retrying(
            retry=tenacity.retry_if_exception(_retryable(method, idempotent)),
            wait=_wait(policy),
            stop=stop,
            before_sleep=announce,
            reraise=True,
        )

    def _attempts(
        self,
        method: str,
        what: str,
        call: Callable[[], httpx.Response],
        idempotent: bool | None = None,
    ) -> httpx.Response:
        """Run `call` under the retry policy; a final retryable status is returned, not raised.

        `idempotent` overrides the method's default, for a POST the hub deduplicates."""
        try:
            return self._retrying(method, what, idempotent)(self._raise_retryable(call))
        except _RetryableStatus as exc:
            return exc.response
        except httpx.HTTPError as exc:
            raise self._unreachable(exc) from exc

    def _raise_retryable(self, call: Callable[[], httpx.Response]) -> Callable[[], httpx.Response]:
        def attempt() -> httpx.Response:
            response = call()
            self._answered = True
            if response.status_code in RETRY_STATUSES:
                response.read()
                response.close()
                raise _RetryableStatus(response)
            return response

        return attempt

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
        idempotent: bool | None = None,
    ) -> Any:
        """Call `API_PREFIX + path` and return the decoded JSON body (None when empty)."""
        response = self._attempts(
            method,
            what,
            lambda: self._http.request(method, API_PREFIX + path, json=json, params=params),
            idempotent,
        )
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

    def _send_following(self, method: str, url: str, **kwargs: Any) -> httpx.Response:
        """Send, following redirects ourselves so the token never leaves the hub's origin.

        (httpx drops Authorization on a cross-origin redirect too; doing it here keeps the
        rule visible and independent of the library's version.)
        """
        target = self._absolute(url)
        for _ in range(MAX_REDIRECTS + 1):
            request = self._http.build_request(method, target, **kwargs)
            if not self._same_origin(target):
                request.headers.pop("Authorization", None)
            response = self._http.send(request, stream=True)
            if not response.is_redirect:
                return response
            response.close()
            target = urljoin(target, response.headers["Location"])
        raise httpx.TooManyRedirects(f"more than {MAX_REDIRECTS} redirects", request=request)

    # ----------------------------------------------------------------- transfers

    def upload(self, url: str, path: Path, *, label: str | None = None) -> None:
        """PUT the file at `path` to an upload URL (the hub's own, or a presigned S3 URL).

        A PUT of the same bytes is idempotent, so an upload cut off by a hub restart starts
        over from the first byte once the hub answers again.
        """
        size = path.stat().st_size
        headers = {"Content-Length": str(size), "Content-Type": "application/octet-stream"}
        with _progress(self.console) as progress:
            task = progress.add_task(label or f"upload {path.name}", total=size)

            def send() -> httpx.Response:
                progress.reset(task, total=size)

                def chunks() -> Iterator[bytes]:
                    with path.open("rb") as handle:
                        while block := handle.read(CHUNK):
                            progress.update(task, advance=len(block))
                            yield block

                response = self._send_following("PUT", url, content=chunks(), headers=headers)
                response.read()
                return response

            response = self._attempts("PUT", f"upload of {path.name}", send)
        self._check(response, f"upload of {path.name}")

    def download(
        self, url: str, dest: Path, *, sha256: str | None = None, label: str | None = None
    ) -> Path:
        """Stream `url` to `dest` (atomically), checking the sha256 when one is given.

        Redirects (the hub's 307 to a presigned storage URL) are followed; a transfer cut off
        midway starts again from the first byte.
        """
        dest.parent.mkdir(parents=True, exist_ok=True)
        partial = dest.with_name(dest.name + ".part")
        digest = hashlib.sha256()
        what = f"download of {dest.name}"

        def fetch() -> httpx.Response:
            nonlocal digest
            response = self._send_following("GET", url)
            if response.status_code in RETRY_STATUSES or not response.is_success:
                return response  # classified by _raise_retryable / _check
            try:
                total = int(response.headers.get("Content-Length", 0)) or None
                digest = hashlib.sha256()
                with _progress(self.console) as progress, partial.open("wb") as handle:
                    task = progress.add_task(label or f"download {dest.name}", total=total)
                    for block in response.iter_bytes(CHUNK):
                        handle.write(block)
                        digest.update(block)
                        progress.update(task, advance=len(block))
            finally:
                response.close()
            return response

        try:
            response = self._attempts("GET", what, fetch)
            if not response.is_success:
                response.read()
                self._check(response, what)
        except BaseException:
            partial.unlink(missing_ok=True)
            raise
        if sha256 and digest.hexdigest() != sha256.lower():
            partial.unlink(missing_ok=True)
            raise HubError(
                f"download of {dest.name}: sha256 mismatch (expected {sha256}, "
                f"got {digest.hexdigest()}); the file was not kept"
            )
        partial.replace(dest)
        return dest

    # ----------------------------------------------------------------- endpoints (docs/api.md)

    def whoami(self) -> dict[str, Any]:
        """`GET /user/whoami`: the account and token scopes behind our token."""
        data = self.data("GET", "/user/whoami", "whoami")
        if not isinstance(data, dict) or "username" not in data:
            raise HubError(f"whoami: unexpected answer from {self.base_url}; is it a prime hub?")
        return data

    def list_environments(self, params: Mapping[str, Any]) -> dict[str, Any]:
        """`GET /environmentshub/`: one page `{data, total_count, page, per_page}`."""
        body = self.request("GET", "/environmentshub/", "list environments", params=params)
        if not isinstance(body, dict) or not isinstance(body.get("data"), list):
            raise HubError(f"list environments: unexpected answer from {self.base_url}")
        return body

    def environment(self, owner: str, name: str) -> dict[str, Any]:
        """`GET /environmentshub/{owner}/{name}`: the environment's summary."""
        return dict(self.data("GET", env_path(owner, name), f"info {owner}/{name}"))

    def version(self, owner: str, name: str, spec: str | None) -> dict[str, Any]:
        """`GET …/@{version|latest}`: the install record of one version."""
        ref = quote(spec or "latest", safe="")
        label = f"{owner}/{name}@{spec}" if spec else f"{owner}/{name}"
        return dict(self.data("GET", f"{env_path(owner, name)}/@{ref}", f"info {label}"))

    def versions(self, owner: str, name: str) -> list[dict[str, Any]]:
        """`GET …/versions`: every version, newest first."""
        return list(
            self.data("GET", f"{env_path(owner, name)}/versions", f"versions of {owner}/{name}")
        )

    def set_yanked(
        self, owner: str, name: str, version: str, yanked: bool, reason: str | None = None
    ) -> dict[str, Any]:
        """`POST …/@{version}/yank` or `/unyank`."""
        action = "yank" if yanked else "unyank"
        path = f"{env_path(owner, name)}/@{quote(version, safe='')}/{action}"
        body = {"reason": reason} if yanked else None
        return dict(self.data("POST", path, f"{action} {owner}/{name}@{version}", json=body))

    def resolve_environment(self, body: Mapping[str, Any]) -> dict[str, Any]:
        """`POST /environmentshub/resolve`: get or create the environment to push to."""
        return dict(
            self.data(
                "POST",
                "/environmentshub/resolve",
                f"resolve {body.get('owner_slug')}/{body.get('name')}",
                json=dict(body),
            )
        )

    def reserve_upload(self, env_id: str, kind: str, body: Mapping[str, Any]) -> dict[str, Any]:
        """`POST …/{env_id}/wheels` or `/versions`: `{wheel_id|version_id, upload_url}`."""
        return dict(
            self.data(
                "POST",
                f"/environmentshub/{env_id}/{kind}",
                f"reserve upload of {body.get('filename')}",
                json=dict(body),
            )
        )

    def finalize_upload(
        self, env_id: str, kind: str, upload_id: str, filename: str
    ) -> dict[str, Any]:
        """`POST …/{env_id}/{wheels|versions}/{id}/finalize`."""
        done = self.data(
            "POST",
            f"/environmentshub/{env_id}/{kind}/{upload_id}/finalize",
            f"finalize upload of {filename}",
        )
        return dict(done or {})

    def create_evaluation(self, body: Mapping[str, Any]) -> str:
        """`POST /evaluations/`: returns the evaluation's id. With a `client_run_id` the hub
        answers a repeat with the same run, so the call is retried like a GET."""
        created = self.request(
            "POST",
            "/evaluations/",
            "create evaluation",
            json=dict(body),
            idempotent=bool(body.get("client_run_id")),
        )
        return str(created["evaluation_id"])

    def push_samples(self, evaluation_id: str, samples: list[dict[str, Any]]) -> None:
        """`POST /evaluations/{id}/samples`: one batch (the hub stores an identical batch once,
        so a repeat after a lost answer adds nothing)."""
        self.request(
            "POST",
            f"/evaluations/{quote(evaluation_id, safe='')}/samples",
            "push samples",
            json={"samples": samples},
            idempotent=True,
        )

    def finalize_evaluation(self, evaluation_id: str, metrics: Mapping[str, Any]) -> None:
        """`POST /evaluations/{id}/finalize`; a repeat that finds the run already closed by
        our own first attempt counts as done."""
        try:
            self.request(
                "POST",
                f"/evaluations/{quote(evaluation_id, safe='')}/finalize",
                "finalize evaluation",
                json={"metrics": dict(metrics)},
                idempotent=True,
            )
        except HubError as exc:
            if exc.status != 409 or self.evaluation(evaluation_id).get("status") != "completed":
                raise

    def list_evaluations(self, params: Mapping[str, Any]) -> dict[str, Any]:
        """`GET /evaluations/`: one page `{data, total_count, page, per_page}`."""
        body = self.request("GET", "/evaluations/", "list evaluations", params=params)
        if not isinstance(body, dict) or not isinstance(body.get("data"), list):
            raise HubError(f"list evaluations: unexpected answer from {self.base_url}")
        return body

    def evaluation(self, evaluation_id: str) -> dict[str, Any]:
        """`GET /evaluations/{id}`: one run with the hub's summary."""
        return dict(
            self.data(
                "GET",
                f"/evaluations/{quote(evaluation_id, safe='')}",
                f"evaluation {evaluation_id}",
            )
        )

    def evaluation_samples(self, evaluation_id: str, page: int, per_page: int) -> dict[str, Any]:
        """`GET /evaluations/{id}/samples`: one page of samples."""
        body = self.request(
            "GET",
            f"/evaluations/{quote(evaluation_id, safe='')}/samples",
            f"samples of {evaluation_id}",
            params={"page": page, "per_page": per_page},
        )
        return dict(body)


def env_path(owner: str, name: str) -> str:
    """The REST path of one environment."""
    return f"/environmentshub/{quote(owner, safe='')}/{quote(name, safe='')}"
