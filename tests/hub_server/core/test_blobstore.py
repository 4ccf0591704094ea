"""The local blob store's write path: an upload's scratch file is fsynced and renamed straight
onto its content key (no second temp file), under one level of fan-out directories, and keys of
the older two-level layout, which rows of older stores still hold, read as before."""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

from hub_server.core.blobstore import BlobStore, content_key


def test_a_scratch_file_becomes_the_blob_at_its_one_level_key(tmp_path: Path) -> None:
    store = BlobStore(str(tmp_path / "blobs"))
    data = b"wheel bytes"
    sha = hashlib.sha256(data).hexdigest()
    scratch = store.scratch_copy(data)
    inode = os.stat(scratch).st_ino
    store.put_file(scratch, content_key(sha))
    blob = tmp_path / "blobs" / "sha256" / sha[:2] / sha
    assert content_key(sha) == f"sha256/{sha[:2]}/{sha}"
    assert blob.read_bytes() == data and os.stat(blob).st_ino == inode  # renamed, not copied
    assert not scratch.exists()
    assert [p.name for p in (tmp_path / "blobs").rglob("*") if ".tmp-" in p.name] == []
    again = store.scratch_copy(data)
    store.put_file(again, content_key(sha))  # already stored: the scratch copy is dropped
    assert not again.exists() and blob.read_bytes() == data


def test_a_key_of_the_older_two_level_layout_still_reads(tmp_path: Path) -> None:
    store = BlobStore(str(tmp_path / "blobs"))
    sha = hashlib.sha256(b"old").hexdigest()
    old_key = f"sha256/{sha[:2]}/{sha[2:4]}/{sha}"
    store.put_bytes(b"old", old_key)
    assert store.exists(old_key)
    with store.open(old_key) as handle:
        assert handle.read() == b"old"
