"""Content-addressed blob storage: the `BlobStorage` interface the hub writes and reads
through, and `BlobStore`, its implementation over fsspec (a local directory or
`s3://bucket/prefix`).

Keys are derived from the sha256 of the bytes, never from user input, so a retried or
concurrent upload of the same file writes the same key and two files can never collide.
Local writes go to a temp file in the destination directory, are fsynced and then renamed
with `os.replace`, so a reader (or a server restarted after SIGKILL) sees either nothing or
the whole blob. Temp files carry the writing process's pid, and every process using a local
store holds an exclusive `flock` on `tmp/.live-PID` for its lifetime; when a store opens it
removes only temp files whose writer no longer holds its lock, so a worker restarting beside
others (`--workers N`) never deletes their in-flight files, and a reused pid fools nothing.
"""

from __future__ import annotations

import fcntl
import os
import tempfile
import time
from pathlib import Path
from typing import IO, Protocol

import fsspec

_TEMP_MARK = ".tmp-"
_CHUNK = 1024 * 1024
# A temp file whose writer cannot be identified (or whose pid was reused) is stale after this.
_STALE_TEMP_SECONDS = 24 * 3600


def content_key(sha256: str) -> str:
    """The store key of a blob with this sha256: one level of 256 fan-out directories, made
    once (older stores' rows keep their two-level keys and are read by them; docs/hub.md)."""
    return f"sha256/{sha256[:2]}/{sha256}"


def staging_key(upload_id: str) -> str:
    """Where a REST upload's bytes wait until finalize validates them."""
    return f"staging/{upload_id}"


class BlobStorage(Protocol):
    """What the hub needs of a blob store. Writes are atomic (a key holds a whole blob or
    nothing); a local store also hands out file paths (sendfile), a remote one presigned URLs."""

    is_local: bool

    def local_path(self, key: str) -> Path: ...
    def scratch_file(self) -> tempfile._TemporaryFileWrapper[bytes]: ...
    def scratch_copy(self, data: bytes) -> Path: ...
    def put_file(self, source: Path, key: str) -> None: ...
    def put_bytes(self, data: bytes, key: str) -> None: ...
    def delete(self, key: str) -> None: ...
    def exists(self, key: str) -> bool: ...
    def open(self, key: str) -> IO[bytes]: ...
    def fetch_to_scratch(self, key: str) -> Path: ...
    def presign_put(self, key: str, expires: int) -> str: ...
    def presign_get(self, key: str, expires: int, filename: str | None = None) -> str: ...


class BlobStore:
    """Blob storage rooted at a local path or an `s3://` URL (a `BlobStorage`)."""

    def __init__(self, url: str, s3_endpoint_url: str | None = None) -> None:
        self.url = url.rstrip("/")
        self.is_local = "://" not in url or url.startswith("file://")
        if self.is_local:
            self.root = Path(url.removeprefix("file://")).expanduser()
            self.root.mkdir(parents=True, exist_ok=True)
            self.fs = fsspec.filesystem("file")
            _hold_live_lock(self.root / "tmp")
            self._remove_temp_files()
        else:
            protocol = url.split("://", 1)[0]
            options: dict[str, object] = {}
            if protocol == "s3" and s3_endpoint_url:
                options["endpoint_url"] = s3_endpoint_url
            self.fs = fsspec.filesystem(protocol, **options)
            self.root = Path()

    # -- paths ---------------------------------------------------------------------------

    def _path(self, key: str) -> str:
        return str(self.root / key) if self.is_local else f"{self.url}/{key}"

    def local_path(self, key: str) -> Path:
        """The file behind `key` in a local store (for sendfile-style responses)."""
        if not self.is_local:
            raise RuntimeError("local_path() is only defined for a local blob store")
        return self.root / key

    def _remove_temp_files(self) -> None:
        """Drop temp files of writes interrupted by a crash; they were never visible.

        Only files of dead processes (or older than a day) go: another worker's live upload
        is left alone.
        """
        now = time.time()
        locks = self.root / "tmp"
        for path in self.root.rglob(f"*{_TEMP_MARK}*"):
            try:
                if not path.is_file():
                    continue
                pid = _writer_pid(path.name)
                stale = now - path.stat().st_mtime > _STALE_TEMP_SECONDS
                if stale or pid is None or not _writer_alive(locks, pid):
                    path.unlink(missing_ok=True)
            except FileNotFoundError:
                continue  # finished or removed by its writer meanwhile

    # -- writes --------------------------------------------------------------------------

    def scratch_file(self) -> tempfile._TemporaryFileWrapper[bytes]:
        """A temp file on the store's filesystem (local) or in the system temp dir (remote).

        Uploads are spooled here, validated, and then moved into place without a copy.
        """
        directory = self.root / "tmp" if self.is_local else None
        if directory is not None:
            directory.mkdir(parents=True, exist_ok=True)
        return tempfile.NamedTemporaryFile(
            prefix=f"upload{_TEMP_MARK}{os.getpid()}-", dir=directory, delete=False
        )

    def put_file(self, source: Path, key: str) -> None:
        """Store the scratch file `source` (from `scratch_file`) under `key`, atomically;
        `source` is consumed.

        Locally the scratch file is fsynced and renamed straight onto its key: it already
        lives on the store's filesystem under a temp name that carries this process's pid, so
        a crash leaves either nothing at the key or the whole blob, and no temp copy beside
        the key is needed (one file creation and one rename per upload, not two).
        """
        if self.exists(key):
            source.unlink(missing_ok=True)
            return
        if not self.is_local:
            try:
                self.fs.put_file(str(source), self._path(key))
            finally:
                source.unlink(missing_ok=True)
            return
        target = self.local_path(key)
        try:
            _make_dirs(target.parent)
            _fsync_path(source)
            _publish(source, target)
        finally:
            source.unlink(missing_ok=True)

    def _temp_beside(self, key: str) -> tuple[Path, Path]:
        """(the local file of `key`, a temp name beside it that carries this process's pid)."""
        target = self.local_path(key)
        _make_dirs(target.parent)
        return target, target.with_name(
            f"{target.name}{_TEMP_MARK}{os.getpid()}-{os.urandom(4).hex()}"
        )

    def scratch_copy(self, data: bytes) -> Path:
        """`data` in a new scratch file (to be consumed by `put_file`)."""
        with self.scratch_file() as handle:
            handle.write(data)
            return Path(handle.name)

    def put_bytes(self, data: bytes, key: str) -> None:
        """Store `data` under `key`, atomically (locally: written straight beside its key,
        without a scratch file to move)."""
        if not self.is_local:
            self.put_file(self.scratch_copy(data), key)
            return
        if self.exists(key):
            return
        target, temp = self._temp_beside(key)
        try:
            with temp.open("xb") as handle:
                handle.write(data)
                handle.flush()
                os.fsync(handle.fileno())
            _publish(temp, target)
        finally:
            temp.unlink(missing_ok=True)

    def delete(self, key: str) -> None:
        """Remove `key` if present (staging cleanup; content blobs are never deleted)."""
        try:
            if self.exists(key):
                self.fs.rm_file(self._path(key))
        except FileNotFoundError:
            pass  # removed concurrently (another worker's sweep)

    # -- reads ---------------------------------------------------------------------------

    def exists(self, key: str) -> bool:
        """True when a complete blob is stored under `key` (locally one `stat`: fsspec's
        wrapper cost several times the system call on every upload)."""
        if self.is_local:
            return os.path.exists(self.local_path(key))
        return bool(self.fs.exists(self._path(key)))

    def open(self, key: str) -> IO[bytes]:
        """Open a stored blob for reading."""
        handle: IO[bytes] = self.fs.open(self._path(key), "rb")
        return handle

    def fetch_to_scratch(self, key: str) -> Path:
        """Copy a blob into a scratch file (validation needs a seekable local file)."""
        with self.scratch_file() as handle:
            path = Path(handle.name)
        self.fs.get_file(self._path(key), str(path))
        return path

    # -- presigned URLs (S3) -------------------------------------------------------------

    def presign_put(self, key: str, expires: int) -> str:
        """A URL the client can PUT the bytes to directly (S3 stores only)."""
        return self._presign(key, expires, "put_object")

    def presign_get(self, key: str, expires: int, filename: str | None = None) -> str:
        """A short-lived download URL (S3 stores only)."""
        return self._presign(key, expires, "get_object", filename)

    def _presign(self, key: str, expires: int, method: str, filename: str | None = None) -> str:
        extra = (
            {"ResponseContentDisposition": f'attachment; filename="{filename}"'} if filename else {}
        )
        url: str = self.fs.url(self._path(key), expires=expires, client_method=method, **extra)
        return url


def _writer_pid(name: str) -> int | None:
    """The pid in a temp file name `….tmp-PID-…`, if there is one."""
    digits = name.partition(_TEMP_MARK)[2].partition("-")[0]
    return int(digits) if digits.isdigit() else None


# Lock files held by this process, by path: one per store directory, open until exit.
_LIVE_LOCKS: dict[str, int] = {}


def _hold_live_lock(directory: Path) -> None:
    """Hold `directory/.live-PID` locked while this process lives (the kernel drops it at exit)."""
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / f".live-{os.getpid()}"
    if str(path) in _LIVE_LOCKS:
        return
    while True:
        fd = os.open(path, os.O_CREAT | os.O_RDWR, 0o600)
        fcntl.flock(fd, fcntl.LOCK_EX)
        # Between the open and the lock, a store checking an earlier process with this pid may
        # have locked the file, taken it for dead and unlinked it; a lock on an unlinked file
        # shows nobody, so lock the file that is at `path` now.
        if _is_at(fd, path):
            break
        os.close(fd)
    _LIVE_LOCKS[str(path)] = fd


def _writer_alive(directory: Path, pid: int) -> bool:
    """True while process `pid` holds its live lock in `directory`; a dead one's lock is removed."""
    path = directory / f".live-{pid}"
    while True:
        try:
            fd = os.open(path, os.O_RDWR)
        except FileNotFoundError:
            return False
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return True
        else:
            # Unlink only the file this lock is on: if `path` was replaced meanwhile (its
            # owner found our unlinked file and made a new one), look again.
            if _is_at(fd, path):
                path.unlink(missing_ok=True)
                return False
        finally:
            os.close(fd)


def _is_at(fd: int, path: Path) -> bool:
    """True if the open file `fd` is the file at `path` (not one unlinked or replaced since)."""
    try:
        current = path.stat()
    except FileNotFoundError:
        return False
    opened = os.fstat(fd)
    return (opened.st_dev, opened.st_ino) == (current.st_dev, current.st_ino)


def _publish(temp: Path, target: Path) -> None:
    """Rename a complete, fsynced temp file onto `target` and persist the rename."""
    os.replace(temp, target)
    _fsync_path(target.parent)  # persists the rename (POSIX: the directory entry)


def _make_dirs(directory: Path) -> None:
    """Create `directory` and any missing parents, each made durable (its parent fsynced, so
    a blob renamed into it later cannot lose the directory entry on a crash)."""
    try:
        os.mkdir(directory)
    except FileExistsError:
        return
    except FileNotFoundError:
        _make_dirs(directory.parent)
        try:
            os.mkdir(directory)
        except FileExistsError:
            return
    _fsync_path(directory.parent)


def _fsync_path(path: Path) -> None:
    """fsync the file or directory at `path` (opened read-only: enough for fsync on Linux)."""
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
