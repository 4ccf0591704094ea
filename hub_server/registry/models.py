"""Database tables of the registry: environments, tags, versions, files, pending uploads.

Rows are never deleted: versions are yanked, and a `DistFile` row is the permanent record that
its filename belongs to those bytes. Other hub modules (evaluations) add their own tables to the
same `SQLModel.metadata` and chain their Alembic migrations on `hub_0001`.
"""

from datetime import datetime

import sqlalchemy as sa
from sqlmodel import Field, Relationship, SQLModel

from hub_server.accounts.models import Owner
from hub_server.core.columns import EnumText
from hub_server.core.ids import new_id, utcnow
from registry_index.schemas.environments import MAX_TAG_LENGTH, Visibility
from registry_index.schemas.versions import FileKind

# Column widths that requests are checked against (SQLite ignores VARCHAR lengths and
# PostgreSQL enforces them: checking first gives both the same 4xx). The tag width is the wire
# schema's, which refuses a longer tag before it reaches the table.
MAX_VERSION_LENGTH = 64
MAX_REQUIRES_PYTHON_LENGTH = 256


class Environment(SQLModel, table=True):
    """An environment `owner/name`: one installable project in the owner's simple index."""

    __table_args__ = (sa.UniqueConstraint("owner_id", "normalized_name"),)

    id: str = Field(default_factory=new_id, primary_key=True, max_length=32)
    owner_id: str = Field(foreign_key="owner.id", max_length=32)
    name: str = Field(max_length=128)
    normalized_name: str = Field(max_length=128, index=True)
    description: str = ""
    visibility: Visibility = Field(default=Visibility.PUBLIC, sa_type=EnumText(Visibility, 8))
    serial: int = 0  # bumped on every change to its files (project page cache)
    downloads: int = 0
    # The range every pushed reward must fall in, when the owner declares one (else any finite).
    reward_min: float | None = None
    reward_max: float | None = None
    created_at: datetime = Field(default_factory=utcnow)
    updated_at: datetime = Field(default_factory=utcnow, index=True)

    owner: Owner = Relationship()
    versions: list["Version"] = Relationship(back_populates="environment")


class EnvironmentTag(SQLModel, table=True):
    """One tag of an environment (a row each, so tag filters use an index)."""

    environment_id: str = Field(foreign_key="environment.id", primary_key=True, max_length=32)
    tag: str = Field(primary_key=True, max_length=MAX_TAG_LENGTH, index=True)


class Version(SQLModel, table=True):
    """One immutable version of an environment."""

    __table_args__ = (sa.UniqueConstraint("environment_id", "canonical_version"),)

    id: str = Field(default_factory=new_id, primary_key=True, max_length=32)
    environment_id: str = Field(foreign_key="environment.id", index=True, max_length=32)
    version: str = Field(max_length=MAX_VERSION_LENGTH)
    canonical_version: str = Field(max_length=MAX_VERSION_LENGTH)
    content_hash: str | None = Field(default=None, max_length=64, index=True)
    summary: str = ""
    requires_python: str | None = Field(default=None, max_length=MAX_REQUIRES_PYTHON_LENGTH)
    requires_dist: str = "[]"  # JSON list
    # The declared rubric (`registry_index.rubric_spec.RubricSpec` as JSON), from the push
    # that published the version; set once, like the version's code.
    rubric_json: str | None = None
    yanked: bool = False
    yanked_reason: str | None = None
    created_at: datetime = Field(default_factory=utcnow)

    environment: Environment = Relationship(back_populates="versions")
    files: list["DistFile"] = Relationship()


class DistFile(SQLModel, table=True):
    """A stored file: wheel, sdist, or `prime env push` source archive.

    The unique (environment, filename) pair makes a filename permanent: it can never be
    re-used with other bytes, since rows are never deleted.
    """

    __table_args__ = (sa.UniqueConstraint("environment_id", "filename"),)

    id: str = Field(default_factory=new_id, primary_key=True, max_length=32)
    environment_id: str = Field(foreign_key="environment.id", max_length=32)
    version_id: str = Field(foreign_key="version.id", index=True, max_length=32)
    filename: str = Field(max_length=255)
    kind: FileKind = Field(sa_type=EnumText(FileKind, 8))
    sha256: str = Field(max_length=64, index=True)
    size: int
    blob_key: str = Field(max_length=255)
    metadata_sha256: str | None = Field(default=None, max_length=64)
    # Files stored before hub_0005 keep their PEP 658 metadata in this blob; newer ones have a
    # `FileMetadata` row instead.
    metadata_blob_key: str | None = Field(default=None, max_length=255)
    requires_python: str | None = Field(default=None, max_length=MAX_REQUIRES_PYTHON_LENGTH)
    uploaded_by: str | None = Field(default=None, foreign_key="user.id", max_length=32)
    uploaded_at: datetime = Field(default_factory=utcnow)
    downloads: int = 0


class FileMetadata(SQLModel, table=True):
    """A wheel's PEP 658 metadata (its `.dist-info/METADATA`, byte for byte), served as
    `<file>.metadata`.

    A row of its own, written in the file's transaction: a blob would cost every upload a
    second file, fan-out directory and fsync, and in `DistFile` it would be loaded with every
    project page. Rows are never deleted, like the file's.
    """

    file_id: str = Field(foreign_key="distfile.id", primary_key=True, max_length=32)
    raw: bytes = Field(sa_type=sa.LargeBinary)


class PendingUpload(SQLModel, table=True):
    """A reserved REST upload (`…/wheels` or `…/versions`) waiting for its PUT and finalize."""

    id: str = Field(default_factory=new_id, primary_key=True, max_length=32)
    environment_id: str = Field(foreign_key="environment.id", max_length=32)
    kind: FileKind = Field(sa_type=EnumText(FileKind, 8))  # a wheel or a source archive
    filename: str = Field(max_length=255)
    sha256: str = Field(max_length=64)
    size: int | None = None
    semantic_version: str = Field(max_length=64)
    content_hash: str | None = Field(default=None, max_length=64)
    rubric_json: str | None = None  # the push's declared rubric, for the version it makes
    secret_hash: str = Field(max_length=64)
    staging_key: str = Field(max_length=255)
    user_id: str = Field(foreign_key="user.id", max_length=32, index=True)
    created_at: datetime = Field(default_factory=utcnow)
    expires_at: datetime
    # Set while one PUT is receiving the bytes: a second concurrent PUT of the URL is refused.
    receiving_since: datetime | None = None
