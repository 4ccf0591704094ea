"""Policy broadcasts: `broadcasts/step_N/`, written by the trainer, loaded by every backend.

A broadcast is a PEFT adapter (`adapter_model.safetensors` + `adapter_config.json`, the
format `vllm serve --enable-lora` loads) or, for full fine-tuning, `model.safetensors` +
`config.json`; plus `policy.json` {version, kind, sha256, probe}. The probe is a fixed token
sequence with the trainer's teacher-forced logprobs under this version: a backend that says it
loaded version N must reproduce them before anything is sampled with N, so a stale or
half-loaded policy stops the run instead of silently training off-policy.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from registry_index.content_hash import file_sha256
from registry_index.peft_adapter import WEIGHTS as ADAPTER_WEIGHTS
from trainer_bridge.protocol.run_dir import RunDir
from trainer_bridge.protocol.stable import is_stable, stable_dir

POLICY_FILE = "policy.json"
FULL_WEIGHTS = "model.safetensors"
PROBE_MESSAGES = [
    {"role": "system", "content": "You are a careful assistant."},
    {"role": "user", "content": "What is 12 + 30? Think, then answer in \\boxed{}."},
    {"role": "assistant", "content": "12 + 30 = 42, so the answer is \\boxed{42}."},
]
"""A fixed, ordinary chat: its ids (through the model's own template) are the probe."""


@dataclass(frozen=True)
class PolicyRef:
    """A policy the trainer broadcast: `broadcasts/step_N/` (a PEFT adapter or full safetensors
    plus `policy.json` {version, sha256, probe})."""

    version: int
    path: Path
    kind: Literal["lora", "full"]
    sha256: str
    lab_path: str | None = None
    """The same adapter on a Lab (`tinker://MODEL/sampler_weights/step_N`) in `--lab` runs."""


@dataclass(frozen=True)
class Probe:
    token_ids: list[int]
    logprobs: list[float]
    """Logprob of token_ids[i+1] given token_ids[:i+1], temperature 1."""


class PolicyError(Exception):
    """A broadcast that is incomplete, corrupt, or not the version asked for."""


def probe_token_ids(tokenizer: Any) -> list[int]:
    return list(tokenizer.apply_chat_template(PROBE_MESSAGES, tokenize=True, return_dict=False))


def write_policy(run_dir: Path, version: int, model: Any, probe: Probe) -> PolicyRef:
    """Write `broadcasts/step_{version}/` atomically, `STABLE` last. `model` is a peft model
    (its adapter is written) or a plain transformers model (full weights)."""
    from safetensors.torch import save_model

    kind: Literal["lora", "full"] = "lora" if hasattr(model, "peft_config") else "full"
    final = RunDir(run_dir).broadcast(version)
    with stable_dir(final, overwrite=True) as scratch:
        if kind == "lora":
            model.save_pretrained(scratch)
            weights = scratch / ADAPTER_WEIGHTS
        else:
            model.config.save_pretrained(scratch)
            weights = scratch / FULL_WEIGHTS
            save_model(model, str(weights))
        ref = PolicyRef(version=version, path=final, kind=kind, sha256=file_sha256(weights))
        _write_manifest(scratch, ref, probe)
    return ref


def write_lab_policy(
    run_dir: Path, version: int, files: dict[str, bytes], probe: Probe, lab_path: str
) -> PolicyRef:
    """Write `broadcasts/step_{version}/` from a Lab's adapter (its PEFT files by name, as
    `hub_client.lab.fetch_adapter` returns them), naming where the Lab holds it."""
    final = RunDir(run_dir).broadcast(version)
    with stable_dir(final, overwrite=True) as scratch:
        for name, data in files.items():
            (scratch / name).write_bytes(data)
        sha = file_sha256(scratch / ADAPTER_WEIGHTS)
        ref = PolicyRef(version=version, path=final, kind="lora", sha256=sha, lab_path=lab_path)
        _write_manifest(scratch, ref, probe)
    return ref


def _write_manifest(directory: Path, ref: PolicyRef, probe: Probe) -> None:
    manifest: dict[str, Any] = {
        "version": ref.version,
        "kind": ref.kind,
        "sha256": ref.sha256,
        "probe": {"token_ids": probe.token_ids, "logprobs": probe.logprobs},
    }
    if ref.lab_path is not None:
        manifest["lab_path"] = ref.lab_path
    (directory / POLICY_FILE).write_text(json.dumps(manifest))


def read_policy(path: Path) -> tuple[PolicyRef, Probe]:
    """The PolicyRef and probe of a stable broadcast directory; PolicyError if incomplete."""
    if not is_stable(path):
        raise PolicyError(f"{path} is not a complete broadcast (no STABLE marker)")
    try:
        manifest = json.loads((path / POLICY_FILE).read_text())
        ref = PolicyRef(
            version=int(manifest["version"]),
            path=path,
            kind=manifest["kind"],
            sha256=str(manifest["sha256"]),
            lab_path=manifest.get("lab_path"),
        )
        probe = Probe(
            token_ids=[int(t) for t in manifest["probe"]["token_ids"]],
            logprobs=[float(x) for x in manifest["probe"]["logprobs"]],
        )
    except (OSError, KeyError, TypeError, ValueError) as exc:
        raise PolicyError(f"{path / POLICY_FILE} is unreadable: {exc}") from exc
    return ref, probe


def weights_file(ref: PolicyRef) -> Path:
    return ref.path / (ADAPTER_WEIGHTS if ref.kind == "lora" else FULL_WEIGHTS)


def load_weights(ref: PolicyRef) -> dict[str, Any]:
    """The broadcast's tensors, after checking them against the sha256 in policy.json."""
    from safetensors.torch import load_file

    path = weights_file(ref)
    if not path.is_file():
        raise PolicyError(f"broadcast {ref.version} has no {path.name}")
    actual = file_sha256(path)
    if actual != ref.sha256:
        raise PolicyError(
            f"broadcast {ref.version}: {path.name} has sha256 {actual[:12]}…, "
            f"policy.json says {ref.sha256[:12]}…"
        )
    return dict(load_file(str(path)))


def apply_weights(model: Any, ref: PolicyRef, tensors: dict[str, Any]) -> None:
    """Copy a broadcast's tensors into `model` in place (same architecture and adapter shape)."""
    if ref.kind == "lora":
        from peft import set_peft_model_state_dict

        result = set_peft_model_state_dict(model, tensors)
        unexpected = list(getattr(result, "unexpected_keys", []) or [])
        if unexpected:
            raise PolicyError(
                f"broadcast {ref.version} has tensors the model lacks: {unexpected[:3]}"
            )
        return
    missing, unexpected = model.load_state_dict(tensors, strict=False)
    # safetensors stores a tied tensor (embeddings = LM head) once, under one of its names
    state = model.state_dict()
    loaded = {state[k].data_ptr() for k in tensors if k in state}
    absent = [k for k in missing if state[k].data_ptr() not in loaded]
    if unexpected or absent:
        raise PolicyError(
            f"broadcast {ref.version} does not match the model: missing {absent[:3]}, "
            f"unexpected {unexpected[:3]}"
        )
