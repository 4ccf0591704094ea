"""Server settings, read from the environment so `prime hub serve` and `prime hub user add`
agree on where the data lives without a config file."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, Field

from registry_index.bounds import MAX_STORED_INT

_DEFAULT_DATA_DIR = Path("~/.local/share/prime-hub")


class HubSettings(BaseModel):
    """Where a hub keeps its data and how hard it lets clients push.

    `database_url` and `storage_url` default to files under `data_dir`, so one directory is a
    complete, portable hub (SQLite in WAL mode + a local blob directory).
    """

    data_dir: Path = Field(default_factory=lambda: _DEFAULT_DATA_DIR.expanduser())
    database_url: str | None = None
    storage_url: str | None = None
    s3_endpoint_url: str | None = None
    public_url: str | None = None
    # A file's size is stored in an INTEGER column (PostgreSQL: at most 2 GiB - 1).
    max_upload_bytes: int = Field(default=100 * 1024 * 1024, ge=1, le=MAX_STORED_INT)
    uploads_per_minute: int = 60
    failed_logins_per_minute: int = 20
    upload_url_ttl_seconds: int = 3600
    # Request bodies (see http/limits.py): an upload route may carry one file plus its form;
    # any other route a JSON document (the largest is a batch of eval samples).
    max_request_bytes: int | None = None  # None: max_upload_bytes + 1 MiB
    max_json_bytes: int = 33 * 1024 * 1024
    max_anonymous_body_bytes: int = 64 * 1024
    # Per-user quotas on reserved-but-unfinished REST uploads (`prime env push`).
    max_pending_uploads_per_user: int = 20
    max_staged_bytes_per_user: int = 1024 * 1024 * 1024
    # What an owner's published LoRA adapters may total (every version's files; adapters.service).
    max_adapter_bytes_per_owner: int = Field(default=5 * 1024**3, ge=1)
    # Background upkeep: expired reservations and abandoned eval runs, every this many seconds.
    sweep_interval_seconds: float = 60.0
    # Downloads are counted in memory and written every this many seconds (index.download_counts).
    download_count_interval_seconds: float = 1.0
    eval_abandon_after_seconds: int = 24 * 3600
    # Nesting depth allowed in one pushed eval sample.
    max_sample_depth: int = 64
    # Verified runs (evals.verification): the sandbox backend the hub re-scores runs in
    # ("docker", "local", "auto"; "off" turns verification off), how many at once, how long
    # one may take, how often the worker looks for work.
    verify_sandbox: Literal["off", "docker", "local", "auto"] = "off"
    verify_concurrency: int = Field(default=1, ge=1, le=64)
    verify_timeout_seconds: float = 900.0
    verify_poll_seconds: float = 2.0
    # Fairness between accounts (evals.verification_queue): runs one account may have waiting
    # (more are not queued), and the verification time it may use in any hour.
    verify_max_pending_per_account: int = Field(default=20, ge=1)
    verify_account_seconds_per_hour: float = Field(default=1800.0, gt=0)
    # What one verification may take (evals.verification): scored samples and their bytes
    # (read streaming, before anything is held), and disk for the install (its uv cache is
    # the verification's own and is deleted with it).
    verify_max_samples: int = Field(default=10_000, ge=1)
    verify_max_sample_bytes: int = Field(default=32 << 20, ge=1 << 20, le=128 << 20)
    verify_disk_bytes: int = Field(default=512 << 20, ge=16 << 20)

    @classmethod
    def from_env(cls, data_dir: Path | str | None = None) -> HubSettings:
        """Settings from `PRIME_HUB_*` variables; an explicit `data_dir` wins over the variable."""
        env = os.environ
        values: dict[str, object] = {}
        chosen_dir = data_dir if data_dir is not None else env.get("PRIME_HUB_DATA_DIR")
        if chosen_dir:
            values["data_dir"] = Path(chosen_dir).expanduser()
        for field, var in (
            ("database_url", "PRIME_HUB_DATABASE_URL"),
            ("storage_url", "PRIME_HUB_STORAGE_URL"),
            ("s3_endpoint_url", "PRIME_HUB_S3_ENDPOINT_URL"),
            ("public_url", "PRIME_HUB_PUBLIC_URL"),
            ("max_upload_bytes", "PRIME_HUB_MAX_UPLOAD_BYTES"),
            ("uploads_per_minute", "PRIME_HUB_UPLOADS_PER_MINUTE"),
            ("failed_logins_per_minute", "PRIME_HUB_FAILED_LOGINS_PER_MINUTE"),
            ("upload_url_ttl_seconds", "PRIME_HUB_UPLOAD_URL_TTL_SECONDS"),
            ("max_request_bytes", "PRIME_HUB_MAX_REQUEST_BYTES"),
            ("max_json_bytes", "PRIME_HUB_MAX_JSON_BYTES"),
            ("max_anonymous_body_bytes", "PRIME_HUB_MAX_ANONYMOUS_BODY_BYTES"),
            ("max_pending_uploads_per_user", "PRIME_HUB_MAX_PENDING_UPLOADS_PER_USER"),
            ("max_staged_bytes_per_user", "PRIME_HUB_MAX_STAGED_BYTES_PER_USER"),
            ("max_adapter_bytes_per_owner", "PRIME_HUB_MAX_ADAPTER_BYTES_PER_OWNER"),
            ("sweep_interval_seconds", "PRIME_HUB_SWEEP_INTERVAL_SECONDS"),
            ("download_count_interval_seconds", "PRIME_HUB_DOWNLOAD_COUNT_INTERVAL_SECONDS"),
            ("eval_abandon_after_seconds", "PRIME_HUB_EVAL_ABANDON_AFTER_SECONDS"),
            ("max_sample_depth", "PRIME_HUB_MAX_SAMPLE_DEPTH"),
            ("verify_sandbox", "PRIME_HUB_VERIFY_SANDBOX"),
            ("verify_concurrency", "PRIME_HUB_VERIFY_CONCURRENCY"),
            ("verify_timeout_seconds", "PRIME_HUB_VERIFY_TIMEOUT_SECONDS"),
            ("verify_poll_seconds", "PRIME_HUB_VERIFY_POLL_SECONDS"),
            ("verify_max_pending_per_account", "PRIME_HUB_VERIFY_MAX_PENDING_PER_ACCOUNT"),
            ("verify_account_seconds_per_hour", "PRIME_HUB_VERIFY_ACCOUNT_SECONDS_PER_HOUR"),
            ("verify_max_samples", "PRIME_HUB_VERIFY_MAX_SAMPLES"),
            ("verify_max_sample_bytes", "PRIME_HUB_VERIFY_MAX_SAMPLE_BYTES"),
            ("verify_disk_bytes", "PRIME_HUB_VERIFY_DISK_BYTES"),
        ):
            if env.get(var):
                values[field] = env[var]
        return cls.model_validate(values)

    @property
    def request_body_limit(self) -> int:
        """The most bytes an upload request may carry: one file plus its multipart framing."""
        if self.max_request_bytes is not None:
            return self.max_request_bytes
        return self.max_upload_bytes + 1024 * 1024

    @property
    def resolved_database_url(self) -> str:
        """The SQLAlchemy URL; SQLite file `hub.sqlite3` in the data directory by default."""
        if self.database_url:
            return self.database_url
        return f"sqlite:///{self.data_dir / 'hub.sqlite3'}"

    @property
    def resolved_storage_url(self) -> str:
        """The blob store root: a local directory `blobs/` in the data directory by default."""
        if self.storage_url:
            return self.storage_url
        return str(self.data_dir / "blobs")
