"""Tenants' checkpoints: archives in the hub's blob store, rows in its database, a quota.

A checkpoint is `tinker://MODEL/KIND/NAME` (KIND `weights`: adapter and optimizer state, from
`save_state`; `sampler_weights`: the adapter alone), kept per account: the same path of
another account is not found, exactly as a path never saved. Archives are content-addressed
blobs (`sha256/…`, like every hub file, local or S3), written before their row, so a row
always names a complete blob. Each account's archives may total `quota_bytes`.
"""

from __future__ import annotations

import hashlib
import io
import json
import re
import tarfile
import uuid
from dataclasses import dataclass

from sqlalchemy.engine import Engine
from sqlalchemy.exc import IntegrityError
from sqlmodel import Session, col, func, select

from hub_server.core.blobstore import BlobStorage, content_key
from hub_server.core.errors import BadRequest, NotFound
from hub_server.lab.models import LabCheckpoint, LabModel
from registry_index.peft_adapter import CONFIG, FILES, tar_files

KINDS = ("weights", "sampler_weights")
_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$")
_MODEL = re.compile(r"^[0-9a-f]{20}:train:[0-9]{1,9}$")


@dataclass(frozen=True)
class TinkerPath:
    model_id: str
    kind: str
    name: str

    def __str__(self) -> str:
        return f"tinker://{self.model_id}/{self.kind}/{self.name}"

    @classmethod
    def new(cls, model_id: str, kind: str, name: str | None) -> TinkerPath:
        """The path a save names (`name`, or a fresh `ckpt-…` name when None)."""
        chosen = name or f"ckpt-{uuid.uuid4().hex[:12]}"
        if not _NAME.match(chosen):
            raise BadRequest(
                f"Checkpoint name {chosen!r}: use letters, digits, '.', '_' or '-' "
                "(at most 128, starting with a letter or digit)."
            )
        return cls(model_id, kind, chosen)

    @classmethod
    def parse(cls, text: str) -> TinkerPath:
        """`tinker://MODEL/KIND/NAME`; a 400 saying the form otherwise."""
        parts = text.removeprefix("tinker://").split("/") if text.startswith("tinker://") else []
        if (
            len(parts) != 3
            or not _MODEL.match(parts[0])
            or parts[1] not in KINDS
            or not _NAME.match(parts[2])
        ):
            raise BadRequest(
                f"{text!r} is not a checkpoint path of this Lab: tinker://MODEL_ID/weights/NAME "
                "or tinker://MODEL_ID/sampler_weights/NAME."
            )
        return cls(parts[0], parts[1], parts[2])


class CheckpointStore:
    """Checkpoint rows and blobs, and the model rows (see the module doc)."""

    def __init__(self, engine: Engine, store: BlobStorage, quota_bytes: int) -> None:
        self.engine = engine
        self.store = store
        self.quota_bytes = quota_bytes

    def register_model(self, account: str, model_id: str, base_model: str, rank: int) -> None:
        with Session(self.engine) as session:
            session.add(LabModel(id=model_id, user_id=account, base_model=base_model, rank=rank))
            session.commit()

    def model_row(self, account: str, model_id: str) -> LabModel | None:
        with Session(self.engine) as session:
            row = session.get(LabModel, model_id)
        return row if row is not None and row.user_id == account else None

    def usage(self, account: str) -> int:
        with Session(self.engine) as session:
            total = session.exec(
                select(func.coalesce(func.sum(LabCheckpoint.size), 0)).where(
                    LabCheckpoint.user_id == account
                )
            ).one()
        return int(total)

    def put(self, account: str, path: TinkerPath, archive: bytes, overwrite: bool = False) -> None:
        """Store `archive` as `path` of `account` (replacing it with `overwrite`); ValueError
        (the caller's) over quota or when the path is taken. Run on the Lab's worker."""
        old = self._row(account, path) if overwrite else None
        used = self.usage(account) - (old.size if old is not None else 0)
        if used + len(archive) > self.quota_bytes:
            raise ValueError(
                f"Checkpoint quota exceeded: {used} of {self.quota_bytes} bytes used, this one "
                f"is {len(archive)}; delete checkpoints first."
            )
        if old is not None:  # replaced only once the new one is known to fit
            self.delete(account, path)
        sha256 = hashlib.sha256(archive).hexdigest()
        self.store.put_bytes(archive, content_key(sha256))
        row = LabCheckpoint(
            user_id=account,
            model_id=path.model_id,
            kind=path.kind,
            name=path.name,
            sha256=sha256,
            size=len(archive),
        )
        try:
            with Session(self.engine) as session:
                session.add(row)
                session.commit()
        except IntegrityError:
            raise ValueError(f"{path} exists already; save under another name.") from None

    def _row(self, account: str, path: TinkerPath) -> LabCheckpoint | None:
        with Session(self.engine) as session:
            return session.exec(
                select(LabCheckpoint).where(
                    LabCheckpoint.user_id == account,
                    LabCheckpoint.model_id == path.model_id,
                    LabCheckpoint.kind == path.kind,
                    LabCheckpoint.name == path.name,
                )
            ).first()

    def find(self, account: str, path: TinkerPath) -> str:
        """The blob key of `account`'s checkpoint `path`; 404 when it has none."""
        row = self._row(account, path)
        if row is None:
            raise NotFound(f"No checkpoint {path} on this Lab for this account.")
        return content_key(row.sha256)

    def delete(self, account: str, path: TinkerPath) -> None:
        """Forget `account`'s checkpoint `path` (404 when it has none), and its blob when no
        other checkpoint holds the same bytes. Run on the Lab's worker, which alone writes
        blobs, so no save can be relying on the blob it removes."""
        row = self._row(account, path)
        if row is None:
            raise NotFound(f"No checkpoint {path} on this Lab for this account.")
        with Session(self.engine) as session:
            session.delete(session.get(LabCheckpoint, row.id))
            session.commit()
            shared = session.exec(
                select(LabCheckpoint.id).where(LabCheckpoint.sha256 == row.sha256)
            ).first()
        if shared is None:
            self.store.delete(content_key(row.sha256))

    def latest_state(self, account: str, model_id: str) -> str | None:
        """The blob key of the model's newest `weights` checkpoint, if it has one."""
        with Session(self.engine) as session:
            row = session.exec(
                select(LabCheckpoint)
                .where(
                    LabCheckpoint.user_id == account,
                    LabCheckpoint.model_id == model_id,
                    LabCheckpoint.kind == "weights",
                )
                .order_by(col(LabCheckpoint.created_at).desc(), col(LabCheckpoint.id).desc())
            ).first()
        return None if row is None else content_key(row.sha256)

    def listing(self, account: str, model_id: str | None = None) -> list[LabCheckpoint]:
        with Session(self.engine) as session:
            query = select(LabCheckpoint).where(LabCheckpoint.user_id == account)
            if model_id is not None:
                query = query.where(LabCheckpoint.model_id == model_id)
            return list(session.exec(query.order_by(col(LabCheckpoint.id))).all())

    def read(self, key: str) -> bytes:
        with self.store.open(key) as handle:
            return handle.read()

    @staticmethod
    def rank_of(archive: bytes) -> int:
        """The LoRA rank an archive's adapter_config.json declares."""
        with tarfile.open(fileobj=io.BytesIO(archive), mode="r") as tar:
            handle = tar.extractfile(CONFIG)
            if handle is None:
                raise ValueError("The checkpoint lacks adapter_config.json.")
            return int(json.load(handle)["r"])

    def peft_files(self, key: str) -> dict[str, bytes]:
        """The PEFT adapter's files of an archive by name (its optimizer state left out)."""
        with tarfile.open(fileobj=io.BytesIO(self.read(key)), mode="r") as tar:
            found = {name: tar.extractfile(name) for name in tar.getnames() if name in FILES}
            return {name: handle.read() for name, handle in found.items() if handle is not None}

    def peft_archive(self, key: str) -> bytes:
        """The archive without its optimizer state: a PEFT adapter directory, as a tar."""
        return tar_files(self.peft_files(key))
