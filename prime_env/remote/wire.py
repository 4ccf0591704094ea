"""The environment-worker protocol: length-prefixed JSON frames over a stream socket.

Standard library only: the worker side imports this file in an environment's own virtualenv,
where neither this SDK nor its dependencies need be installed (a verifiers package pins
`openai<3`, the SDK needs `openai>=3.57`).

A frame is a 4-byte big-endian length and that many bytes of UTF-8 JSON. The worker is the
server: on accept it sends `hello` (protocol version, the environment, its rubric's names and
weights, its task counts); the runner then sends requests `{"id", "op", ...}` and the worker
answers each with `{"id", "result"}` or `{"id", "error": {"type", "message"}}`, in any order,
so one connection carries every rollout in flight. Ops: `tasks`, `rollout`, `score_group`,
`forget`. Nothing in a message depends on the two processes sharing a machine: the model
endpoint of a rollout is a URL and a per-rollout key, so a worker on another host needs only
a listening address (`tcp:HOST:PORT`) and a model endpoint it can reach.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

PROTOCOL = 1
MAX_FRAME = 256 * 1024 * 1024
"""A frame larger than this is refused: a stray peer cannot make the other side allocate
without bound."""


class ProtocolError(Exception):
    """The peer sent something that is not a frame of this protocol."""


def encode(message: dict[str, Any]) -> bytes:
    data = json.dumps(message, separators=(",", ":"), default=str).encode()
    if len(data) > MAX_FRAME:
        raise ProtocolError(f"a message of {len(data)} bytes is over the {MAX_FRAME} byte limit")
    return len(data).to_bytes(4, "big") + data


async def read_message(reader: asyncio.StreamReader) -> dict[str, Any] | None:
    """The next message, or None at a clean end of stream."""
    try:
        head = await reader.readexactly(4)
    except asyncio.IncompleteReadError as exc:
        if exc.partial:
            raise ProtocolError("the stream ended inside a frame header") from None
        return None
    size = int.from_bytes(head, "big")
    if size > MAX_FRAME:
        raise ProtocolError(f"a frame of {size} bytes is over the {MAX_FRAME} byte limit")
    try:
        data = await reader.readexactly(size)
    except asyncio.IncompleteReadError:
        raise ProtocolError("the stream ended inside a frame") from None
    try:
        message = json.loads(data)
    except ValueError as exc:
        raise ProtocolError(f"a frame is not JSON: {exc}") from None
    if not isinstance(message, dict):
        raise ProtocolError("a frame is not a JSON object")
    return message


def parse_address(address: str) -> tuple[str, str, int]:
    """`unix:PATH` or `tcp:HOST:PORT` as (kind, path-or-host, port)."""
    kind, _, rest = address.partition(":")
    if kind == "unix" and rest:
        return "unix", rest, 0
    if kind == "tcp":
        host, _, port = rest.rpartition(":")
        if host and port.isdigit():
            return "tcp", host.strip("[]"), int(port)
    raise ValueError(f"a worker address is unix:PATH or tcp:HOST:PORT, got {address!r}")


async def open_connection(address: str) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
    kind, where, port = parse_address(address)
    if kind == "unix":
        return await asyncio.open_unix_connection(where, limit=1 << 20)
    return await asyncio.open_connection(where, port, limit=1 << 20)
