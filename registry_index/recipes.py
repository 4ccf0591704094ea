"""Training recipes an environment ships in its wheel: `<package>/train/<model>.toml`.

A recipe is a `prime train` config (prime-rl's key names) tuned for one model on this
environment; `<model>` is the last part of the model's name, lower case
(`local/smollm2-135m` → `smollm2-135m.toml`, `HuggingFaceTB/SmolLM2-135M-Instruct` →
`smollm2-135m-instruct.toml`). `prime train OWNER/NAME` uses the one for its model; the hub's
environment page lists them, read from the wheel without running anything.
"""

from __future__ import annotations

import zipfile
from dataclasses import dataclass
from pathlib import PurePosixPath
from typing import IO

RECIPE_DIR = "train"
MAX_RECIPE_BYTES = 64 * 1024


@dataclass(frozen=True)
class Recipe:
    model: str
    """The file's stem: what `recipe_stem` gives for the model it is for."""
    path: str
    """Inside the wheel (or the package), e.g. `arithmetic/train/smollm2-135m.toml`."""
    text: str


def recipe_stem(model: str) -> str:
    """The recipe file stem for a model name or directory."""
    return PurePosixPath(model.replace("\\", "/").rstrip("/")).name.lower()


def wheel_recipes(wheel: IO[bytes] | str) -> list[Recipe]:
    """The recipes in a wheel (path or open file), by model; [] for none or an unreadable one."""
    found: list[Recipe] = []
    try:
        with zipfile.ZipFile(wheel) as archive:
            for info in archive.infolist():
                parts = PurePosixPath(info.filename).parts
                if (
                    len(parts) != 3
                    or parts[1] != RECIPE_DIR
                    or parts[0].endswith((".dist-info", ".data"))
                    or not parts[2].endswith(".toml")
                    or info.file_size > MAX_RECIPE_BYTES
                ):
                    continue
                try:
                    text = archive.read(info).decode("utf-8")
                except UnicodeDecodeError:
                    continue
                found.append(Recipe(parts[2].removesuffix(".toml"), info.filename, text))
    except (zipfile.BadZipFile, OSError, ValueError):
        return []
    return sorted(found, key=lambda r: r.model)
