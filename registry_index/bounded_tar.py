"""Streaming .tar.gz reading with a cap on the decompressed bytes.

Walking a tar inside gzip decompresses every byte before the member you want, so a small
upload of zeros could burn minutes of CPU; counting the decompressed bytes and stopping at a
budget turns that compression bomb into a clear refusal instead.
"""

from __future__ import annotations

import gzip
import io
import tarfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import IO

from registry_index.errors import InvalidUpload

_BUFFER = 64 * 1024


class _BoundedReader(io.RawIOBase):
    """A decompressed stream that refuses to produce more than `limit` bytes."""

    def __init__(self, source: IO[bytes], limit: int, what: str) -> None:
        self._source = source
        self._limit = limit
        self._what = what
        self._count = 0

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: memoryview) -> int:  # type: ignore[override]
        data = self._source.read(len(buffer))
        self._count += len(data)
        if self._count > self._limit:
            raise InvalidUpload(
                f"The {self._what} unpacks to more than {self._limit / (1024 * 1024):.1f} MiB; "
                f"this looks like a compression bomb. Make the {self._what} smaller."
            )
        buffer[: len(data)] = data
        return len(data)


@contextmanager
def open_tar_gz(
    source: str | Path | bytes, limit: int, what: str = "sdist"
) -> Iterator[tarfile.TarFile]:
    """A sequential (`r|`) TarFile over the file at `source` (or the bytes `source`) that stops
    after `limit` decompressed bytes."""
    raw_file = io.BytesIO(source) if isinstance(source, bytes) else open(source, "rb")  # noqa: SIM115
    with raw_file as raw, gzip.GzipFile(fileobj=raw) as unzipped:
        bounded = io.BufferedReader(_BoundedReader(unzipped, limit, what), buffer_size=_BUFFER)  # type: ignore[arg-type]
        with tarfile.open(fileobj=bounded, mode="r|") as archive:
            yield archive
