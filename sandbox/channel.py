"""Byte channels from the host to a sandbox's supervisor: plain pipes, or Docker's attach socket.

WHY hand-rolled reads: the supervisor's frames travel over a raw file descriptor (a pipe pair for
the local backend, the multiplexed attach stream for Docker), every read needs a deadline so a
hung or dead sandbox becomes a `SandboxError` instead of a hang, and every size is bounded
because the bytes come from untrusted code.
"""

from __future__ import annotations

import os
import select
import struct
import time
from typing import Protocol

from sandbox.errors import SandboxError
from sandbox.supervisor import _HEADER

# Docker's stream multiplexing header: stream type (1 stdin, 1 stdout, 2 stderr), 3 zero bytes,
# big-endian payload length.
_DOCKER_FRAME = struct.Struct(">BxxxI")
# The supervisor's stderr (its own tracebacks) is kept for error messages, up to this many bytes.
_STDERR_KEEP = 16 << 10


class Channel(Protocol):
    def send(self, data: bytes, deadline: float) -> None: ...

    def recv_frame(self, max_size: int, deadline: float) -> bytes: ...

    def diagnostics(self) -> str: ...

    def close(self) -> None: ...


def _wait(fd: int, for_write: bool, deadline: float) -> None:
    remaining = deadline - time.monotonic()
    if remaining <= 0:
        raise TimeoutError
    poller = select.poll()
    poller.register(fd, select.POLLOUT if for_write else select.POLLIN)
    if not poller.poll(remaining * 1000):
        raise TimeoutError


class _FdReader:
    """Exact-size reads from a file descriptor with a deadline."""

    def __init__(self, fd: int) -> None:
        self.fd = fd
        self.buffer = bytearray()

    def read_exact(self, size: int, deadline: float) -> bytes:
        while len(self.buffer) < size:
            _wait(self.fd, False, deadline)
            chunk = os.read(self.fd, max(size - len(self.buffer), 1 << 16))
            if not chunk:
                raise EOFError
            self.buffer += chunk
        data = bytes(self.buffer[:size])
        del self.buffer[:size]
        return data


def _write_all(fd: int, data: bytes, deadline: float) -> None:
    view = memoryview(data)
    while view:
        _wait(fd, True, deadline)
        written = os.write(fd, view[: 1 << 20])
        view = view[written:]


def _check_size(length: int, max_size: int) -> None:
    if length > max_size:
        raise SandboxError(f"the sandbox sent a {length}-byte frame (limit {max_size}); closing it")


class PipeChannel:
    """The local backend: the supervisor's stdin and stdout are pipes of our own."""

    def __init__(self, write_fd: int, read_fd: int, stderr_fd: int | None) -> None:
        self.write_fd = write_fd
        self.reader = _FdReader(read_fd)
        self.stderr_fd = stderr_fd
        for fd in (write_fd, read_fd) + ((stderr_fd,) if stderr_fd is not None else ()):
            os.set_blocking(fd, False)

    def send(self, data: bytes, deadline: float) -> None:
        _write_all(self.write_fd, data, deadline)

    def recv_frame(self, max_size: int, deadline: float) -> bytes:
        (length,) = _HEADER.unpack(self.reader.read_exact(_HEADER.size, deadline))
        _check_size(length, max_size)
        return self.reader.read_exact(length, deadline)

    def diagnostics(self) -> str:
        if self.stderr_fd is None:
            return ""
        try:
            return os.read(self.stderr_fd, _STDERR_KEEP).decode("utf-8", "replace")
        except (BlockingIOError, OSError):
            return ""

    def close(self) -> None:
        for fd in (self.write_fd, self.reader.fd, self.stderr_fd):
            if fd is not None:
                try:
                    os.close(fd)
                except OSError:
                    pass


class DockerAttachChannel:
    """The Docker backend: one attach socket carrying stdin up and multiplexed stdout/stderr down."""

    def __init__(self, sock: object) -> None:
        # docker-py hands back a SocketIO wrapper (holding the HTTP response) on Unix sockets;
        # we read the socket itself, and must close all three or the fd outlives the sandbox.
        self.wrapper = sock
        self.sock = getattr(sock, "_sock", sock)
        self.fd: int = self.sock.fileno()  # type: ignore[attr-defined]
        os.set_blocking(self.fd, False)
        self.reader = _FdReader(self.fd)
        self.payload = bytearray()
        self.stderr = bytearray()

    def send(self, data: bytes, deadline: float) -> None:
        view = memoryview(data)
        while view:
            _wait(self.fd, True, deadline)
            view = view[self.sock.send(view[: 1 << 20]) :]  # type: ignore[attr-defined]

    def _fill(self, size: int, max_size: int, deadline: float) -> None:
        while len(self.payload) < size:
            kind, length = _DOCKER_FRAME.unpack(
                self.reader.read_exact(_DOCKER_FRAME.size, deadline)
            )
            _check_size(length, max_size + _HEADER.size)
            chunk = self.reader.read_exact(length, deadline)
            if kind == 2:
                self.stderr = (self.stderr + chunk)[-_STDERR_KEEP:]
            else:
                self.payload += chunk

    def recv_frame(self, max_size: int, deadline: float) -> bytes:
        self._fill(_HEADER.size, max_size, deadline)
        (length,) = _HEADER.unpack(self.payload[: _HEADER.size])
        _check_size(length, max_size)
        self._fill(_HEADER.size + length, max_size, deadline)
        frame = bytes(self.payload[_HEADER.size : _HEADER.size + length])
        del self.payload[: _HEADER.size + length]
        return frame

    def diagnostics(self) -> str:
        return self.stderr.decode("utf-8", "replace")

    def close(self) -> None:
        response = getattr(self.wrapper, "_response", None)
        for closable in (response, self.wrapper, self.sock):
            try:
                closable.close()  # type: ignore[union-attr]
            except (OSError, ValueError, AttributeError):
                pass
