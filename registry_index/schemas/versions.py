"""Versions of an environment, their files, and the install record `prime env install` reads."""

from __future__ import annotations

from datetime import datetime
from enum import StrEnum

from pydantic import BaseModel, Field

from registry_index.rubric_spec import RubricSpec
from registry_index.schemas.environments import Visibility
from registry_index.schemas.request import RequestBody


class FileKind(StrEnum):
    """What a stored file is: a wheel, an sdist (twine), or a `prime env push` source archive."""

    WHEEL = "wheel"
    SDIST = "sdist"
    SOURCE = "source"


class FileOut(BaseModel):
    filename: str
    kind: FileKind
    sha256: str
    size: int
    url: str
    uploaded_at: datetime
    downloads: int


class VersionInfo(BaseModel):
    id: str
    semantic_version: str
    content_hash: str | None
    yanked: bool
    yanked_reason: str | None
    requires_python: str | None
    created_at: datetime
    downloads: int
    files: list[FileOut]
    # The rubric the version declares ([tool.prime.rubric]: name -> {weight, range}), if any.
    rubric: RubricSpec | None = None


class InstallRecord(BaseModel):
    """What `prime env install` needs to install one version."""

    id: str
    owner: str
    name: str
    package_name: str
    semantic_version: str
    version_id: str
    content_hash: str | None
    visibility: Visibility
    yanked: bool
    yanked_reason: str | None
    requires_python: str | None
    requires_dist: list[str]
    simple_index_url: str
    install_index_url: str
    wheel_url: str | None
    wheel_sha256: str | None
    wheel_filename: str | None
    source_url: str | None
    package_url: str | None  # the stock `prime env pull` / private install reads this name
    url_dependencies: list[str]
    created_at: datetime


class YankRequest(RequestBody):
    reason: str | None = Field(default=None, max_length=1000)
