"""A teacher run by torch in the orchestrator's process (as the torch backend samples there):
`local/<name>`, or `prime train export`'s output (a PEFT adapter on the student's base, or a
merged Hugging Face model). One model serves its traces (a `LocalClient`) and its logprobs
of given tokens (the trainer's own teacher-forced forward, temperature 1).
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

from local_model.client import LocalClient
from trainer_bridge.config import ModelConfig, TeacherConfig
from trainer_bridge.inference.teachers import LOCAL_PREFIX
from trainer_bridge.trainer.modeling import load_base, right_pad, token_logprobs


class LocalTeacher:
    """A torch model in this process: a `LocalClient` for its traces, its forward for logprobs."""

    def __init__(self, cfg: TeacherConfig, student: ModelConfig, threads: int = 1) -> None:
        self.cfg = cfg
        self.student = student
        name = cfg.model.removeprefix(LOCAL_PREFIX) if cfg.model.startswith(LOCAL_PREFIX) else None
        loader = None if name is not None else self._load_directory
        self.client = LocalClient(name or cfg.model, threads=threads, loader=loader)

    def _load_directory(self) -> tuple[Any, Any]:
        path = Path(self.cfg.model)
        cpu = {"device": "cpu", "dtype": "float32", "lora": None}
        if (path / "adapter_config.json").is_file():
            from peft import PeftModel

            base, tokenizer = load_base(self.student.model_copy(update=cpu))
            model = PeftModel.from_pretrained(base, str(path))
        else:
            model, tokenizer = load_base(
                ModelConfig(name=str(path), lora=None, device="cpu", dtype="float32")
            )
        model.eval()
        return model, tokenizer

    async def logprobs(self, token_ids: list[int]) -> list[float]:
        await self.client.ensure_loaded()
        return await asyncio.to_thread(self._score, token_ids)

    def _score(self, token_ids: list[int]) -> list[float]:
        import torch

        model = self.client._model
        with self.client.lock, torch.inference_mode():
            padded = right_pad([token_ids], 0, next(model.parameters()).device)
            values, _ = token_logprobs(model, padded.input_ids, padded.attention_mask)
        return [float(x) for x in values[0, 1 : len(token_ids)]]

    async def close(self) -> None:
        await self.client.aclose()
