"""The typed client of the hub's REST API (`docs/api.md`): one method per endpoint the CLI calls.

Each answer is parsed with its wire schema from `registry_index.schemas`, and every failure is a
`HubError` whose one-line message says how to fix it, so a command prints it, never a traceback.
Transfers verify sizes and sha256 digests; progress and retries go to the caller's `Feedback`.
Requests are retried only where a retry cannot duplicate anything, and the token is sent only to
the hub's own origin (docs/cli.md, "Flaky networks, restarts and storage redirects").
"""

from __future__ import annotations

import hashlib
import secrets
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Self, TypeVar
from urllib.parse import quote, urljoin, urlsplit

import httpx
import tenacity
from pydantic import BaseModel, ValidationError

from hub_client.feedback import Feedback
from hub_client.settings import Settings, load_settings
from registry_index.schemas.accounts import WhoAmI
from registry_index.schemas.adapters import (
    AdapterPatch,
    AdapterSummary,
    AdapterVersionInfo,
    LabPublish,
    PublishOptions,
)
from registry_index.schemas.envelope import Envelope, Page
from registry_index.schemas.environments import EnvironmentDetail, EnvironmentSummary
from registry_index.schemas.errors import ErrorBody
from registry_index.schemas.evals import (
    BatchAccepted,
    CreateEvaluation,
    EvaluationEnvelope,
    EvaluationInfo,
    FinalizeEvaluation,
)
from registry_index.schemas.push import (
    FinalizeResult,
    ResolveRequest,
    ResolveResponse,
    SourceReservation,
    UploadRequest,
    WheelReservation,
)
from registry_index.schemas.versions import InstallRecord, VersionInfo, YankRequest
from registry_index.validation import DEFAULT_LIMITS

API_PREFIX = "/api/v1"
CHUNK = 256 * 1024
IDEMPOTENT = frozenset({"GET", "HEAD", "PUT", "DELETE", "OPTIONS"})
RETRY_STATUSES = frozenset({429, 502, 503, 504})
NEVER_PROCESSED = frozenset({429, 503})  # the hub refused before doing anything: any method
MAX_REDIRECTS = 5
M = TypeVar("M", bound=BaseModel)


class HubError(Exception):
    """A hub request that failed; the message is meant for the user, on one line."""

    def __init__(self, message: str, status: int | None = None) -> None:
        super().__init__(message)
        self.status = status


def _too_large(name: str, max_bytes: int) -> HubError:
    return HubError(
        f"download of {name}: the hub sent more than {max_bytes // (1024 * 1024)} MiB, the "
        "largest archive an install accepts; nothing was kept"
    )


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
class HubRetryPolicy:
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


def _wait(policy: HubRetryPolicy) -> Callable[[tenacity.RetryCallState], float]:
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


def error_detail(response: httpx.Response) -> str:
    """The hub's error sentence (`ErrorBody.detail`), else the first line of whatever another
    server (a proxy, the storage) answered, else the reason phrase."""
    try:
        return ErrorBody.model_validate_json(response.content).detail
    except ValidationError:
        text = response.text.strip()
        return text.splitlines()[0][:300] if text else response.reason_phrase


class HubClient:
    """Talks to one hub with one (optional) token; use as a context manager or call close()."""

    def __init__(
        self,
        base_url: str,
        api_key: str | None = None,
        *,
        timeout: float = 30.0,
        feedback: Feedback | None = None,
        transport: httpx.BaseTransport | None = None,
        retry: HubRetryPolicy | None = None,
    ) -> None:
        self.base_url = base_url.rstrip("/")
        self.api_key = api_key
        self.feedback = feedback or Feedback()
        self.retry = retry or HubRetryPolicy()
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
            self.feedback.warn(
                f"{what}: {reason}; retrying in {delay:.1f} s "
                f"(attempt {state.attempt_number + 1} of {attempts()})"
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
        status, detail = response.status_code, error_detail(response)
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

    def _call(
        self,
        method: str,
        path: str,
        what: str,
        *,
        json: Any = None,
        params: Mapping[str, Any] | None = None,
        files: Mapping[str, Path] | None = None,
        idempotent: bool | None = None,
    ) -> Any:
        """Call `API_PREFIX + path` and return the decoded JSON body (None when empty); `files`
        go as a multipart body, each part named after its file, opened afresh per attempt."""

        def send() -> httpx.Response:
            with ExitStack() as opened:
                parts = {
                    name: (name, opened.enter_context(file.open("rb")), "application/octet-stream")
                    for name, file in (files or {}).items()
                }
                return self._http.request(
                    method, API_PREFIX + path, json=json, params=params, files=parts or None
                )

        response = self._attempts(method, what, send, idempotent)
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

    def _typed(
        self,
        model: type[M],
        method: str,
        path: str,
        what: str,
        *,
        body: BaseModel | None = None,
        json: Any = None,
        params: Mapping[str, Any] | None = None,
        files: Mapping[str, Path] | None = None,
        idempotent: bool | None = None,
    ) -> M:
        """Call one endpoint and parse its answer with its wire schema (`registry_index.schemas`).

        The request body is `body` (its request model, only the fields that were set) or plain
        `json`. An answer of another shape (an older or foreign server, a proxy's page) is a
        `HubError` that names what was wrong, never a validation traceback."""
        if body is not None:
            json = body.model_dump(mode="json", exclude_unset=True)
        answer = self._call(
            method, path, what, json=json, params=params, files=files, idempotent=idempotent
        )
        try:
            return model.model_validate(answer)
        except ValidationError as exc:
            raise HubError(
                f"{what}: unexpected answer from {self.base_url} ({_first_problem(exc, 'answer')}); "
                "is PRIME_HUB_URL pointing at a prime hub of a compatible version?"
            ) from None

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
        with self.feedback.progress(label or f"upload {path.name}", size) as progress:

            def send() -> httpx.Response:
                progress.reset(size)

                def chunks() -> Iterator[bytes]:
                    with path.open("rb") as handle:
                        while block := handle.read(CHUNK):
                            progress.advance(len(block))
                            yield block

                response = self._send_following("PUT", url, content=chunks(), headers=headers)
                response.read()
                return response

            response = self._attempts("PUT", f"upload of {path.name}", send)
        self._check(response, f"upload of {path.name}")

    def download(
        self,
        url: str,
        dest: Path,
        *,
        sha256: str | None = None,
        label: str | None = None,
        max_bytes: int = DEFAULT_LIMITS.max_file_size,
    ) -> Path:
        """Stream `url` to `dest` (atomically), checking the sha256 when one is given.

        Redirects (the hub's 307 to a presigned storage URL) are followed; a transfer cut off
        midway starts again from the first byte. More than `max_bytes` (by default the largest
        archive the installer would accept afterwards) stops the transfer there: a hostile or
        broken hub cannot fill the disk before the archive checks run.
        """
        dest.parent.mkdir(parents=True, exist_ok=True)
        # A partial file of this download's own: two processes fetching the same wheel into
        # the shared cache (two `prime env install`s) each write theirs and rename it into place.
        partial = dest.with_name(f".{secrets.token_hex(6)}-{dest.name}.part")
        digest = hashlib.sha256()
        what = f"download of {dest.name}"

        def fetch() -> httpx.Response:
            nonlocal digest
            response = self._send_following("GET", url)
            if response.status_code in RETRY_STATUSES or not response.is_success:
                return response  # classified by _raise_retryable / _check
            try:
                total = int(response.headers.get("Content-Length", 0)) or None
                if total is not None and total > max_bytes:
                    raise _too_large(dest.name, max_bytes)
                digest = hashlib.sha256()
                received = 0
                with (
                    self.feedback.progress(label or f"download {dest.name}", total) as progress,
                    partial.open("wb") as handle,
                ):
                    for block in response.iter_bytes(CHUNK):
                        received += len(block)
                        if received > max_bytes:
                            raise _too_large(dest.name, max_bytes)
                        handle.write(block)
                        digest.update(block)
                        progress.advance(len(block))
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
    # One method per endpoint the CLI calls; each answers with its model from
    # `registry_index.schemas`, the same one the hub's route declares.

    def whoami(self) -> WhoAmI:
        """`GET /user/whoami`: the account and token scopes behind our token."""
        return self._typed(Envelope[WhoAmI], "GET", "/user/whoami", "whoami").data

    def list_environments(
        self,
        *,
        search: str | None = None,
        tags: Sequence[str] = (),
        owner: str | None = None,
        visibility: str | None = None,
        mine: bool = False,
        sort: str | None = None,
        order: str | None = None,
        page: int = 1,
        per_page: int = 20,
    ) -> Page[EnvironmentSummary]:
        """`GET /environmentshub/`: one page of the environments we may see, filtered."""
        params: dict[str, Any] = {"page": page, "per_page": per_page}
        for key, value in (
            ("search", search),
            ("owner", owner),
            ("visibility", visibility),
            ("sort", sort),
            ("order", order),
        ):
            if value:
                params[key] = value
        if tags:
            params["tag"] = list(tags)
        if mine:
            params["mine"] = "true"
        return self._typed(
            Page[EnvironmentSummary], "GET", "/environmentshub/", "list environments", params=params
        )

    def environment(self, owner: str, name: str) -> EnvironmentDetail:
        """`GET /environmentshub/{owner}/{name}`: the environment's summary."""
        return self._typed(
            Envelope[EnvironmentDetail], "GET", env_path(owner, name), f"info {owner}/{name}"
        ).data

    def version(
        self, owner: str, name: str, spec: str | None, *, what: str | None = None
    ) -> InstallRecord:
        """`GET …/@{version|latest}`: the install record of the version `spec` selects."""
        ref = quote(spec or "latest", safe="")
        what = what or (f"info {owner}/{name}@{spec}" if spec else f"info {owner}/{name}")
        return self._typed(
            Envelope[InstallRecord], "GET", f"{env_path(owner, name)}/@{ref}", what
        ).data

    def versions(self, owner: str, name: str) -> list[VersionInfo]:
        """`GET …/versions`: every version, newest first."""
        path = f"{env_path(owner, name)}/versions"
        return self._typed(
            Envelope[list[VersionInfo]], "GET", path, f"versions of {owner}/{name}"
        ).data

    def set_yanked(
        self, owner: str, name: str, version: str, yanked: bool, reason: str | None = None
    ) -> VersionInfo:
        """`POST …/@{version}/yank` or `/unyank`."""
        action = "yank" if yanked else "unyank"
        path = f"{env_path(owner, name)}/@{quote(version, safe='')}/{action}"
        what = f"{action} {owner}/{name}@{version}"
        body = YankRequest(reason=reason) if yanked else None
        return self._typed(Envelope[VersionInfo], "POST", path, what, body=body).data

    def resolve_environment(self, body: ResolveRequest) -> ResolveResponse:
        """`POST /environmentshub/resolve`: get or create the environment to push to."""
        what = f"resolve {body.owner_slug}/{body.name}"
        path = "/environmentshub/resolve"
        return self._typed(Envelope[ResolveResponse], "POST", path, what, body=body).data

    def reserve_wheel(self, env_id: str, body: UploadRequest) -> WheelReservation:
        """`POST …/{env_id}/wheels`: a one-time URL to PUT the wheel to."""
        path = f"/environmentshub/{quote(env_id, safe='')}/wheels"
        what = f"reserve upload of {body.filename}"
        return self._typed(Envelope[WheelReservation], "POST", path, what, body=body).data

    def reserve_source(self, env_id: str, body: UploadRequest) -> SourceReservation:
        """`POST …/{env_id}/versions`: a one-time URL to PUT the source archive to."""
        path = f"/environmentshub/{quote(env_id, safe='')}/versions"
        what = f"reserve upload of {body.filename}"
        return self._typed(Envelope[SourceReservation], "POST", path, what, body=body).data

    def finalize_wheel(self, env_id: str, wheel_id: str, filename: str) -> FinalizeResult:
        """`POST …/{env_id}/wheels/{wheel_id}/finalize`: validate the bytes and publish."""
        path = f"/environmentshub/{quote(env_id, safe='')}/wheels/{quote(wheel_id, safe='')}"
        what = f"finalize upload of {filename}"
        return self._typed(Envelope[FinalizeResult], "POST", f"{path}/finalize", what).data

    def finalize_source(self, env_id: str, version_id: str, filename: str) -> FinalizeResult:
        """`POST …/{env_id}/versions/{version_id}/finalize`: validate the bytes and publish."""
        path = f"/environmentshub/{quote(env_id, safe='')}/versions/{quote(version_id, safe='')}"
        what = f"finalize upload of {filename}"
        return self._typed(Envelope[FinalizeResult], "POST", f"{path}/finalize", what).data

    def create_evaluation(self, body: CreateEvaluation) -> EvaluationInfo:
        """`POST /evaluations/`: the new run. With a `client_run_id` the hub answers a repeat
        with the same run, so the call is retried like a GET."""
        return self._typed(
            EvaluationEnvelope,
            "POST",
            "/evaluations/",
            "create evaluation",
            body=body,
            idempotent=bool(body.client_run_id),
        ).data

    def push_samples(self, evaluation_id: str, samples: list[dict[str, Any]]) -> BatchAccepted:
        """`POST /evaluations/{id}/samples`: one batch of rollout records (the hub stores an
        identical batch once, so a repeat after a lost answer adds nothing)."""
        return self._typed(
            Envelope[BatchAccepted],
            "POST",
            f"/evaluations/{quote(evaluation_id, safe='')}/samples",
            "push samples",
            json={"samples": samples},  # rollout records (`registry_index.record`)
            idempotent=True,
        ).data

    def finalize_evaluation(self, evaluation_id: str, metrics: Mapping[str, Any]) -> EvaluationInfo:
        """`POST /evaluations/{id}/finalize`; a repeat that finds the run already closed by
        our own first attempt counts as done."""
        try:
            return self._typed(
                EvaluationEnvelope,
                "POST",
                f"/evaluations/{quote(evaluation_id, safe='')}/finalize",
                "finalize evaluation",
                body=FinalizeEvaluation(metrics=dict(metrics)),
                idempotent=True,
            ).data
        except HubError as exc:
            if exc.status != 409:
                raise
            closed = self.evaluation(evaluation_id)
            if closed.status != "completed":
                raise
            return closed

    def list_evaluations(
        self,
        *,
        env: str | None = None,
        model: str | None = None,
        page: int = 1,
        per_page: int = 20,
    ) -> Page[EvaluationInfo]:
        """`GET /evaluations/`: one page of the runs we may read, newest first."""
        params: dict[str, Any] = {"page": page, "per_page": per_page}
        if env:
            params["env"] = env
        if model:
            params["model"] = model
        return self._typed(
            Page[EvaluationInfo], "GET", "/evaluations/", "list evaluations", params=params
        )

    def evaluation(self, evaluation_id: str) -> EvaluationInfo:
        """`GET /evaluations/{id}`: one run with the hub's summary."""
        return self._typed(
            Envelope[EvaluationInfo],
            "GET",
            f"/evaluations/{quote(evaluation_id, safe='')}",
            f"evaluation {evaluation_id}",
        ).data

    def evaluation_samples(
        self, evaluation_id: str, page: int, per_page: int
    ) -> Page[dict[str, Any]]:
        """`GET /evaluations/{id}/samples`: one page of the run's rollout records."""
        return self._typed(
            Page[dict[str, Any]],
            "GET",
            f"/evaluations/{quote(evaluation_id, safe='')}/samples",
            f"samples of {evaluation_id}",
            params={"page": page, "per_page": per_page},
        )

    # ----------------------------------------------------------------- adapters

    def list_adapters(
        self, owner: str | None = None, *, page: int = 1, per_page: int = 20
    ) -> Page[AdapterSummary]:
        """`GET /adapters/`: one page of the adapters we may read (of `owner` when given)."""
        params: dict[str, Any] = {"page": page, "per_page": per_page}
        if owner:
            params["owner"] = owner
        return self._typed(
            Page[AdapterSummary], "GET", "/adapters/", "list adapters", params=params
        )

    def adapter(self, owner: str, name: str) -> AdapterSummary:
        """`GET /adapters/{owner}/{name}`."""
        return self._typed(
            Envelope[AdapterSummary], "GET", adapter_path(owner, name), f"adapter {owner}/{name}"
        ).data

    def adapter_versions(self, owner: str, name: str) -> list[AdapterVersionInfo]:
        """`GET /adapters/{owner}/{name}/versions`: newest first."""
        return self._typed(
            Envelope[list[AdapterVersionInfo]],
            "GET",
            f"{adapter_path(owner, name)}/versions",
            f"versions of adapter {owner}/{name}",
        ).data

    def adapter_version(self, owner: str, name: str, spec: str | None) -> AdapterVersionInfo:
        """`GET /adapters/{owner}/{name}/@{spec|latest}`: the version `spec` selects."""
        ref = quote(spec or "latest", safe="")
        what = f"adapter {owner}/{name}" + (f"@{spec}" if spec else "")
        return self._typed(
            Envelope[AdapterVersionInfo], "GET", f"{adapter_path(owner, name)}/@{ref}", what
        ).data

    def push_adapter(
        self, owner: str, name: str, files: Mapping[str, Path], options: PublishOptions
    ) -> AdapterVersionInfo:
        """`POST /adapters/{owner}/{name}/versions`: the PEFT files as one multipart body."""
        return self._typed(
            Envelope[AdapterVersionInfo],
            "POST",
            f"{adapter_path(owner, name)}/versions",
            f"push adapter {owner}/{name}",
            params=options.model_dump(mode="json", exclude_none=True),
            files=files,
        ).data

    def publish_lab_checkpoint(self, owner: str, name: str, body: LabPublish) -> AdapterVersionInfo:
        """`POST /adapters/{owner}/{name}/versions/from-lab`: one of our Lab checkpoints."""
        return self._typed(
            Envelope[AdapterVersionInfo],
            "POST",
            f"{adapter_path(owner, name)}/versions/from-lab",
            f"publish {body.checkpoint} as {owner}/{name}",
            body=body,
        ).data

    def update_adapter(self, owner: str, name: str, patch: AdapterPatch) -> AdapterSummary:
        """`PATCH /adapters/{owner}/{name}`: description or visibility."""
        return self._typed(
            Envelope[AdapterSummary],
            "PATCH",
            adapter_path(owner, name),
            f"edit adapter {owner}/{name}",
            body=patch,
        ).data


def _first_problem(exc: ValidationError, whole: str) -> str:
    """The first thing pydantic found wrong, as `where: what` (`whole` when it is the body)."""
    first = exc.errors()[0]
    where = ".".join(str(part) for part in first["loc"]) or whole
    return f"{where}: {first['msg'].removeprefix('Value error, ')}"


@contextmanager
def checked_request(what: str) -> Iterator[None]:
    """Build a request body inside this block: a value the hub would refuse (a tag too long, a
    name too long) is a one-line `HubError` before anything is sent, not a traceback."""
    try:
        yield
    except ValidationError as exc:
        raise HubError(f"{what}: {_first_problem(exc, 'request')}") from None


def env_path(owner: str, name: str) -> str:
    """The REST path of one environment."""
    return f"/environmentshub/{quote(owner, safe='')}/{quote(name, safe='')}"


def adapter_path(owner: str, name: str) -> str:
    """The REST path of one adapter."""
    return f"/adapters/{quote(owner, safe='')}/{quote(name, safe='')}"
