"""Project names: PEP 503 normalisation and PEP 508 validity.

Every lookup, URL and uniqueness check in the hub goes through `normalize`, so `Foo.Bar`,
`foo_bar` and `FOO-bar` are one project, exactly as pip and uv expect.
"""

from __future__ import annotations

import re
import sys

from registry_index.errors import InvalidUpload

_SEPARATORS = re.compile(r"[-_.]+")
_ULTRA_DROP = str.maketrans({".": None, "_": None, "-": None})
_ULTRA_MAP = str.maketrans({"l": "1", "i": "1", "o": "0"})
_VALID_NAME = re.compile(r"^([A-Z0-9]|[A-Z0-9][A-Z0-9._-]*[A-Z0-9])\Z", re.IGNORECASE)
MAX_NAME_LENGTH = 128


def normalize(name: str) -> str:
    """PEP 503 normal form: runs of `-`, `_`, `.` become one `-`, lower-cased."""
    return _SEPARATORS.sub("-", name).lower()


def is_valid_project_name(name: str) -> bool:
    """True when `name` is a valid PEP 508 distribution name of reasonable length."""
    return len(name) <= MAX_NAME_LENGTH and _VALID_NAME.match(name) is not None


def validate_project_name(name: str) -> None:
    """Raise `InvalidUpload` unless `name` is a valid PEP 508 distribution name."""
    if not name:
        raise InvalidUpload("The project name is empty; give the package a name in pyproject.toml.")
    if len(name) > MAX_NAME_LENGTH:
        raise InvalidUpload(
            f"The project name is {len(name)} characters long; use at most {MAX_NAME_LENGTH}."
        )
    if _VALID_NAME.match(name) is None:
        raise InvalidUpload(
            f"{name!r} is not a valid project name: use only ASCII letters, digits, '.', '_' "
            "and '-', starting and ending with a letter or digit."
        )


def ultranormalize(name: str) -> str:
    """Warehouse's confusable form: separators dropped, `l`/`i` -> `1`, `o` -> `0`.

    Two names with the same ultranormal form (`wordle`, `w0rdle`, `word-le`) are too similar to
    coexist in one namespace: a typo would install the other one.
    """
    return name.lower().translate(_ULTRA_DROP).translate(_ULTRA_MAP)


def is_stdlib_name(name: str) -> bool:
    """True when `name` normalises to a standard-library module (PyPI reserves those)."""
    return normalize(name).replace("-", "_") in sys.stdlib_module_names
