"""Names: projects (PEP 503 normalisation, PEP 508 validity) and owners (users, organisations).

Every lookup, URL and uniqueness check in the hub, the CLI and the SDK goes through `normalize`
(packaging's `canonicalize_name`), so `Foo.Bar`, `foo_bar` and `FOO-bar` are one project, exactly
as pip and uv expect; and every owner name is checked by `check_owner_name`, the one owner rule.
"""

from __future__ import annotations

import re
import sys

from packaging.utils import NormalizedName, canonicalize_name

from registry_index.errors import InvalidUpload

# The confusable form (`ultranormalize`) as substitutions applied after lower-casing; the hub
# also applies them in SQL to find a confusable neighbour without loading every name.
ULTRA_REPLACEMENTS: tuple[tuple[str, str], ...] = (
    (".", ""), ("_", ""), ("-", ""), ("l", "1"), ("i", "1"), ("o", "0"),
)  # fmt: skip
_ULTRA = str.maketrans({old: new or None for old, new in ULTRA_REPLACEMENTS})
_VALID_NAME = re.compile(r"^([A-Z0-9]|[A-Z0-9][A-Z0-9._-]*[A-Z0-9])\Z", re.IGNORECASE)
MAX_NAME_LENGTH = 128


# Owners are URL path segments (`/{owner}/simple/`) and the first part of `owner/name`: 1-40
# lowercase letters, digits and '-', starting and ending with a letter or digit. Owner names are
# case-insensitive: references are lower-cased (`owner_key`) before they are checked or looked up.
OWNER_PATTERN = r"[a-z0-9](?:[a-z0-9-]{0,38}[a-z0-9])?"
_OWNER = re.compile(rf"^{OWNER_PATTERN}\Z")
OWNER_RULE = (
    "use 1-40 lowercase letters, digits and '-', starting and ending with a letter or digit"
)


def normalize(name: str) -> NormalizedName:
    """PEP 503 normal form: runs of `-`, `_`, `.` become one `-`, lower-cased (typed as
    packaging's `NormalizedName`, so a name not yet normalised cannot pass for one)."""
    return canonicalize_name(name)


def module_name(name: str) -> str:
    """The import name an environment called `name` is found under (`Word-Le` -> `word_le`)."""
    return normalize(name).replace("-", "_")


def owner_key(name: str) -> str:
    """The form an owner name is stored and looked up in (owners are case-insensitive)."""
    return name.strip().lower()


def is_valid_owner_name(name: str) -> bool:
    """True when `name` is a valid user or organisation name (already lower-cased)."""
    return _OWNER.match(name) is not None


def check_owner_name(name: str) -> None:
    """Raise ValueError (with the rule) unless `name` is a valid user or organisation name."""
    if not is_valid_owner_name(name):
        raise ValueError(f"{name!r} is not a valid user or organisation name: {OWNER_RULE}.")


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
    return name.lower().translate(_ULTRA)


def is_stdlib_name(name: str) -> bool:
    """True when `name` normalises to a standard-library module (PyPI reserves those)."""
    return module_name(name) in sys.stdlib_module_names
