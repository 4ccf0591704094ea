"""Environment references `owner/name[@version-or-specifier]` and version selection.

Selection follows the installers' rules so `prime env install` picks what pip would: yanked
versions only for an exact pin (PEP 592), pre-releases only when asked for or when nothing else
matches (PEP 440).
"""

from __future__ import annotations

from dataclasses import dataclass

from packaging.specifiers import InvalidSpecifier, SpecifierSet
from packaging.version import InvalidVersion, Version

from registry_index.errors import InvalidEnvRef
from registry_index.names import (
    OWNER_RULE,
    NormalizedName,
    is_valid_owner_name,
    is_valid_project_name,
    normalize,
    owner_key,
)


@dataclass(frozen=True)
class EnvRef:
    """A parsed reference; `spec` is None (latest), an exact version, or a specifier set."""

    owner: str
    name: NormalizedName
    spec: str | None = None

    def __str__(self) -> str:
        return f"{self.owner}/{self.name}" + (f"@{self.spec}" if self.spec else "")


def parse_env_id(ref: str, noun: str = "environment") -> tuple[str | None, str, str | None]:
    """The one grammar of environment references, `[owner/]name[@spec]`, as (owner, name, spec)
    (LoRA adapters on the hub are named alike: `noun` says which the messages name).

    `owner` is lower-cased (owners are case-insensitive) and None when absent; `name` is as
    written (a valid PEP 508 name); `spec` is None for the latest version, else an exact version
    or a specifier set. InvalidEnvRef, saying how to write it, for anything else.
    """
    text = ref.strip()
    base, at, spec = text.partition("@")
    owner, slash, name = base.partition("/")
    if not slash:
        owner, name = "", base
    if "/" in name:
        raise InvalidEnvRef(
            f"{ref!r} is not {_article(noun)} {noun} reference; write it as OWNER/NAME or "
            "OWNER/NAME@VERSION (for example 'alice/wordle@1.2.0')."
        )
    if slash and not is_valid_owner_name(owner_key(owner)):
        raise InvalidEnvRef(f"{owner!r} in {ref!r} is not a valid owner: {OWNER_RULE}.")
    if not is_valid_project_name(name):
        raise InvalidEnvRef(
            f"{name!r} in {ref!r} is not a valid {noun} name: use letters, digits, '-', "
            "'_' or '.', starting and ending with a letter or digit."
        )
    if at:
        spec = spec.strip()
        if not spec:
            raise InvalidEnvRef(
                f"{ref!r} has an empty version after '@'; write e.g. '@1.2.0' or '@>=1.2,<2', "
                "or leave out '@' for the latest version."
            )
        if spec == "latest":
            spec = ""
        else:
            _parse_spec(spec, ref)
    return (owner_key(owner) if slash else None), name, spec or None


def parse_env_ref(ref: str, noun: str = "environment") -> EnvRef:
    """Parse `owner/name`, `owner/name@1.2.0` or `owner/name@>=1.2,<2` (the owner is required;
    `InvalidEnvRef` without one)."""
    owner, name, spec = parse_env_id(ref, noun)
    if owner is None:
        raise InvalidEnvRef(
            f"{ref!r} has no owner; write it as OWNER/NAME or OWNER/NAME@VERSION "
            "(for example 'alice/wordle@1.2.0')."
        )
    return EnvRef(owner=owner, name=normalize(name), spec=spec)


def _article(noun: str) -> str:
    return "an" if noun[:1] in "aeiou" else "a"


def _parse_spec(spec: str, ref: str | None = None) -> Version | SpecifierSet:
    """An exact version (`1.2`, `==1.2`) as a Version, anything else as a SpecifierSet."""
    try:
        return Version(spec)
    except InvalidVersion:
        pass
    try:
        specifiers = SpecifierSet(spec)
    except InvalidSpecifier:
        where = f" in {ref!r}" if ref else ""
        raise InvalidEnvRef(
            f"{spec!r}{where} is neither a version nor a version specifier; write e.g. "
            "'1.2.0', '==1.2.0' or '>=1.2,<2'."
        ) from None
    return specifiers


def _exact_pin(specifiers: SpecifierSet) -> Version | None:
    items = list(specifiers)
    if len(items) == 1 and items[0].operator in ("==", "===") and "*" not in items[0].version:
        try:
            return Version(items[0].version)
        except InvalidVersion:
            return None
    return None


def select_version(available: list[tuple[Version, bool]], spec: str | None) -> Version:
    """Pick the version to install from `(version, yanked)` pairs.

    `spec` is None or "latest", an exact version, or a specifier set. Raises `LookupError`
    (listing what exists) when nothing fits, `InvalidEnvRef` when `spec` cannot be parsed.
    """
    parsed = _parse_spec(spec) if spec and spec != "latest" else None
    pin = parsed if isinstance(parsed, Version) else None
    if isinstance(parsed, SpecifierSet):
        pin = _exact_pin(parsed)
    if pin is not None:
        for version, _yanked in available:
            if version == pin:
                return version  # an exact pin may select a yanked version (PEP 592)
        raise LookupError(_not_found(f"version {pin}", available))
    candidates = [version for version, yanked in available if not yanked]
    specifiers = parsed if isinstance(parsed, SpecifierSet) else SpecifierSet()
    final = list(specifiers.filter(candidates, prereleases=False))
    matching = final or list(specifiers.filter(candidates, prereleases=True))
    if not matching:
        wanted = f"a version matching {spec!r}" if spec else "a version"
        raise LookupError(_not_found(wanted, available))
    return max(matching)


def latest_version(available: list[tuple[Version, bool]]) -> Version | None:
    """What "latest" means everywhere (install, the web page, an eval's `@latest`): the newest
    version that is not yanked, a final release unless only pre-releases exist; None when
    nothing is installable without an exact pin."""
    try:
        return select_version(available, None)
    except LookupError:
        return None


def _not_found(wanted: str, available: list[tuple[Version, bool]]) -> str:
    if not available:
        return f"No {wanted.removeprefix('a ')} is available: nothing has been published yet."
    listed = ", ".join(
        f"{version}{' (yanked)' if yanked else ''}" for version, yanked in sorted(available)
    )
    return f"Could not find {wanted}; available versions: {listed}."
