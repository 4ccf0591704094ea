"""The recipe an installed environment ships for a model (registry_index/recipes.py has the
rule), found in its package directory: the layer under the `-c` files and flags."""

from __future__ import annotations

from pathlib import Path

from registry_index.recipes import RECIPE_DIR, recipe_stem


def find_recipe(package: Path | None, model: str) -> Path | None:
    """`<package>/train/<model>.toml` if the environment ships one for `model`."""
    if package is None:
        return None
    path = package / RECIPE_DIR / f"{recipe_stem(model)}.toml"
    return path if path.is_file() else None


def shipped_recipes(package: Path | None) -> list[str]:
    """The models an environment ships recipes for (what to suggest when there is none)."""
    if package is None or not (package / RECIPE_DIR).is_dir():
        return []
    return sorted(p.stem for p in (package / RECIPE_DIR).glob("*.toml"))
