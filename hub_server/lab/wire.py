"""The Tinker API's wire format, read and written with the `tinker` SDK's own types.

Requests arrive as the SDK sends them: JSON for most, protobuf (`application/x-protobuf`,
maybe zstd-compressed) for forward_backward. A forward_backward's and a sample's result go
back as protobuf (the SDK 0.38 accepts no other form for them), the rest as JSON of the SDK's
pydantic models. Only the Lab imports this module, and only once it is enabled: `tinker`
(an extra, `prime-envhub[lab]`) is heavy to import.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import zstandard
from tinker.proto import tinker_public_pb2 as pb

PROTOBUF = "application/x-protobuf"

_DTYPES: dict[int, Any] = {
    pb.DTYPE_FLOAT32: np.float32,
    pb.DTYPE_INT64: np.int64,
    pb.DTYPE_INT32: np.int32,
}


@dataclass
class ForwardBackwardCall:
    """A decoded forward_backward request: per datum its tokens and its loss inputs."""

    model_id: str
    seq_id: int
    loss_fn: str
    config: dict[str, float]
    forward_only: bool
    tokens: list[np.ndarray]
    inputs: list[dict[str, np.ndarray]]


def read_forward_backward(body: bytes, content_encoding: str | None) -> ForwardBackwardCall:
    """The SDK's protobuf forward_backward body; ValueError naming what is wrong."""
    if content_encoding == "zstd":
        try:
            body = zstandard.ZstdDecompressor().decompress(body, max_output_size=1 << 30)
        except zstandard.ZstdError as error:
            raise ValueError(f"the zstd body does not decompress: {error}") from None
    message = pb.ForwardBackwardRequest()
    try:
        message.ParseFromString(body)
    except Exception as error:  # noqa: BLE001 - protobuf raises DecodeError and others
        raise ValueError(f"the body is not a ForwardBackwardRequest: {error}") from None
    tokens: list[np.ndarray] = []
    inputs: list[dict[str, np.ndarray]] = []
    for index, datum in enumerate(message.data):
        parts = []
        for chunk in datum.model_input:
            if chunk.WhichOneof("chunk") != "encoded_text":
                raise ValueError(f"datum {index}: only token chunks are served (no images).")
            parts.append(np.frombuffer(chunk.encoded_text.tokens, dtype=np.int32))
        tokens.append(np.concatenate(parts).astype(np.int64) if parts else np.zeros(0, np.int64))
        inputs.append({name: _tensor(t) for name, t in datum.loss_fn_inputs.items()})
    config = {k: float(v) for k, v in message.loss_fn_config.items()}
    for key, value in message.loss_fn_config_v2.items():
        if value.WhichOneof("value") == "number":
            config[key] = float(value.number)
    return ForwardBackwardCall(
        model_id=message.model_id,
        seq_id=message.seq_id,
        loss_fn=message.loss_fn,
        config=config,
        forward_only=message.forward_only,
        tokens=tokens,
        inputs=inputs,
    )


def _tensor(message: Any) -> np.ndarray:
    dtype = _DTYPES.get(message.dtype)
    if dtype is None:
        raise ValueError(f"unsupported tensor dtype {message.dtype}")
    if message.HasField("sparse_csr"):
        raise ValueError("sparse loss inputs are not served; send dense tensors.")
    array = np.frombuffer(message.dense, dtype=dtype)
    shape = list(message.shape)
    return array.reshape(shape) if shape else array


def forward_backward_output(
    outputs: list[dict[str, np.ndarray]], metrics: dict[str, float]
) -> bytes:
    """The protobuf ForwardBackwardOutput: one ArrayRecord, a BatchedTensor per field."""
    message = pb.ForwardBackwardOutput(loss_fn_output_type="ArrayRecord", metrics=metrics)
    record = message.loss_fn_outputs.add()
    record.type_tag = "ArrayRecord"
    record.num_datums = len(outputs)
    for name in outputs[0] if outputs else {}:
        arrays = [np.ascontiguousarray(out[name], dtype=np.float32) for out in outputs]
        offsets = np.cumsum([0] + [a.nbytes for a in arrays]).astype(np.int64)
        field = record.fields[name]
        field.data = b"".join(a.tobytes() for a in arrays)
        field.offsets = offsets.tobytes()
        field.dtype = pb.DTYPE_FLOAT32
    return bytes(message.SerializeToString())


def sample_response(
    sequences: list[tuple[list[int], list[float], str]],
    prompt_logprobs: list[float] | None = None,
) -> bytes:
    """The protobuf SampleResponse of sampled (tokens, logprobs, stop reason) triples, and
    the prompt's logprobs when asked (NaN where none is computed: the first token, and those
    before `prompt_logprobs_last_n`)."""
    message = pb.SampleResponse()
    if prompt_logprobs is not None:
        message.prompt_logprobs = np.asarray(prompt_logprobs, dtype=np.float32).tobytes()
    for tokens, logprobs, stop in sequences:
        seq = message.sequences.add()
        seq.tokens = np.asarray(tokens, dtype=np.int32).tobytes()
        seq.logprobs = np.asarray(logprobs, dtype=np.float32).tobytes()
        seq.stop_reason = pb.STOP_REASON_STOP if stop == "stop" else pb.STOP_REASON_LENGTH
    return bytes(message.SerializeToString())


def prompt_tokens(prompt: Any) -> list[int]:
    """The token ids of a SampleRequest's `prompt` (a ModelInput of token chunks)."""
    tokens: list[int] = []
    for chunk in prompt.chunks:
        if getattr(chunk, "type", None) != "encoded_text":
            raise ValueError("only token chunks are served in a prompt (no images).")
        tokens.extend(int(t) for t in chunk.tokens)
    return tokens


def stops(stop: Any) -> tuple[list[int], list[str]]:
    """SamplingParams.stop (None, a string, strings or token ids) as (ids, strings)."""
    if stop is None:
        return [], []
    if isinstance(stop, str):
        return [], [stop]
    items = list(stop)
    return [int(s) for s in items if isinstance(s, int)], [s for s in items if isinstance(s, str)]


def parse(model: str, body: Any) -> Any:
    """`body` (decoded JSON) as the SDK's request type named `model`; ValueError naming the
    problem when it is not one."""
    import pydantic
    from tinker import types

    cls = getattr(types, model)
    try:
        return cls.model_validate(body)
    except pydantic.ValidationError as error:
        problems = "; ".join(
            f"{'.'.join(str(p) for p in e['loc'])}: {e['msg']}" for e in error.errors()[:5]
        )
        raise ValueError(f"not a {model}: {problems}") from None
