"""Validation and storage format of pushed samples (rollout records, schema `prime.rollout/1`).

The hub does not trust a client's summary: it recomputes means from the samples, so every
sample must carry the few fields the maths needs (which example, which rollout, the reward or
the error), checked by `registry_index.record.ScoredRollout`, the SDK's own record rules.
Everything else in the record is kept verbatim. The stock `prime` client sends verifiers' flat
rows (`example_id`, `rollout_number`), so those names are accepted as aliases.
"""

from __future__ import annotations

import gzip
import io
import json
from collections.abc import Iterator, Sequence
from typing import Any

from pydantic import ValidationError

from hub_server.evals.integrity import IntegrityError, check_record
from registry_index.record import ScoredRollout

# Clients split batches by bytes only (the stock SDK at 25 MiB), so the count limit is loose:
# it only bounds the memory a batch of tiny records takes once parsed.
MAX_SAMPLES_PER_BATCH = 100_000
# The prime client splits batches at 25 MiB of JSON; leave room for its framing.
MAX_BATCH_BYTES = 32 * 1024 * 1024
# Batches one run may hold (the 1,001st push is a 413): each is a row and a blob, and every
# push reads the keys of all earlier ones. `prime eval push` sends a 100k-rollout run in a
# handful.
MAX_BATCHES_PER_RUN = 1000


class SampleError(ValueError):
    """A batch of samples that cannot be stored as sent; the message says which sample and why.

    `status` is the HTTP status the API answers with: 400 malformed, 409 a rollout pushed
    twice, 413 a batch over the limits.
    """

    def __init__(self, message: str, status: int = 400) -> None:
        super().__init__(message)
        self.status = status


_ALIASES = {"example_id": "example_index", "rollout_number": "rollout_index"}


def _normalise(raw: dict[str, Any]) -> dict[str, Any]:
    """Map verifiers' flat-row names onto the rollout record's names (record wins on conflict)."""
    record = dict(raw)
    for alias, name in _ALIASES.items():
        if name not in record and alias in record:
            record[name] = record.pop(alias)
    return record


def _describe(exc: ValidationError) -> str:
    first = exc.errors()[0]
    message = str(first["msg"]).removeprefix("Value error, ")
    where = ".".join(str(part) for part in first["loc"])
    return f".{where}: {message}" if where else f": {message}"


def validate_batch(raw_samples: Sequence[Any]) -> list[dict[str, Any]]:
    """Check a batch and return the records to store; raise SampleError naming the bad sample.

    A rollout without an error must have a reward; a rollout with an error is kept as an
    error whatever reward it carries, so a failure can never be averaged in as a 0. Scores and
    indices are checked as sent (`integrity.check_record`: a JSON number, never a string a lax
    parser would convert) and stored as parsed, so what is stored is what was checked.
    """
    if not raw_samples:
        raise SampleError("samples is empty: send at least one sample per batch")
    if len(raw_samples) > MAX_SAMPLES_PER_BATCH:
        raise SampleError(
            f"too many samples in one batch ({len(raw_samples)}); "
            f"send at most {MAX_SAMPLES_PER_BATCH} per request",
            status=413,
        )
    records: list[dict[str, Any]] = []
    for position, raw in enumerate(raw_samples):
        if not isinstance(raw, dict):
            raise SampleError(f"samples[{position}] is not a JSON object")
        record = _normalise(raw)
        try:
            check_record(record)
            parsed = ScoredRollout.model_validate(record)
        except IntegrityError as exc:
            raise SampleError(f"samples[{position}].{exc}") from None
        except ValidationError as exc:
            raise SampleError(f"samples[{position}]{_describe(exc)}") from None
        record["example_index"] = parsed.example_index
        record["rollout_index"] = parsed.rollout_index
        record["error"] = parsed.error.model_dump() if parsed.error else None
        record["reward"] = None if parsed.error else parsed.reward
        for group in ("rewards", "metrics"):
            if group in record:
                record[group] = getattr(parsed, group)
        records.append(record)
    return records


def assign_keys(records: Sequence[dict[str, Any]], taken: set[tuple[int, int]]) -> None:
    """Give every record its (example_index, rollout_index) identity, refusing repeats.

    verifiers' rows carry only the example id; their rollouts are numbered in the order they
    arrive, after the indices already stored for that example. `taken` is updated in place.
    """
    next_free: dict[int, int] = {}
    for example, rollout in taken:
        next_free[example] = max(next_free.get(example, 0), rollout + 1)
    for position, record in enumerate(records):
        example = record["example_index"]
        if record["rollout_index"] is None:
            record["rollout_index"] = next_free.get(example, 0)
        key = (example, record["rollout_index"])
        if key in taken:
            raise SampleError(
                f"samples[{position}] repeats example_index={key[0]}, rollout_index={key[1]}, "
                "already pushed to this evaluation or earlier in this batch; push each rollout once",
                status=409,
            )
        taken.add(key)
        next_free[example] = max(next_free.get(example, 0), key[1] + 1)


def sample_key(record: dict[str, Any]) -> tuple[int, int]:
    """The identity of a rollout inside one evaluation."""
    return int(record["example_index"]), int(record["rollout_index"])


def encode_batch(records: Sequence[dict[str, Any]]) -> bytes:
    """Gzip-compressed JSONL, byte-for-byte reproducible (mtime 0) so equal batches share a blob."""
    buffer = io.BytesIO()
    with gzip.GzipFile(fileobj=buffer, mode="wb", mtime=0, compresslevel=6) as stream:
        for record in records:
            stream.write(json.dumps(record, ensure_ascii=False, separators=(",", ":")).encode())
            stream.write(b"\n")
    return buffer.getvalue()


def decode_batch(blob: bytes) -> Iterator[dict[str, Any]]:
    """Yield the records of one stored batch, in the order they were pushed."""
    for line in batch_lines(blob):
        yield decode_record(line)


def decode_record(line: bytes) -> dict[str, Any]:
    """One stored record. A NaN or Infinity in a batch stored before the hub refused them
    reads as null, so no answer built from it fails to serialise."""
    return json.loads(line, parse_constant=lambda _name: None)  # type: ignore[no-any-return]


def batch_lines(blob: bytes) -> Iterator[bytes]:
    """The JSON text of each record of one stored batch, in push order, not yet parsed (a
    viewer showing 20 records of a 5,000-record batch parses only those)."""
    with gzip.GzipFile(fileobj=io.BytesIO(blob), mode="rb") as stream:
        for line in stream:
            if line.strip():
                yield line
