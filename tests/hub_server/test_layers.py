"""The hub's layering, checked on its source: routers hold no SQL, services import no FastAPI,
and the hub imports no package above it (only `registry_index` of this repository's own)."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

HUB = Path(__file__).resolve().parents[2] / "hub_server"
_ABOVE = ("prime_cli", "prime_env", "trainer_bridge", "builtin_envs", "hub_client")


def _modules(pattern: str) -> list[Path]:
    return sorted(HUB.rglob(pattern))


def _imports(path: Path) -> list[str]:
    found = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found.extend(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module:
            found.extend(f"{node.module}.{alias.name}" for alias in node.names)
    return found


ROUTERS = [
    *_modules("api.py"),
    *_modules("*_api.py"),
    *_modules("*_pages.py"),
]
SERVICES = [
    *_modules("service.py"),
    *(
        HUB / name
        for name in (
            "registry/push.py",
            "registry/publishing.py",
            "index/upload.py",
            "adapters/publishing.py",
        )
    ),
]


@pytest.mark.parametrize("path", ROUTERS, ids=lambda p: str(p.relative_to(HUB)))
def test_routers_hold_no_sql(path: Path) -> None:
    """A router may open a session (and type it); statements are the services' business."""
    allowed = {"sqlmodel.Session"}
    sql = [
        name
        for name in _imports(path)
        if name.startswith(("sqlalchemy", "sqlmodel")) and name not in allowed
    ]
    calls = [
        node.func.attr
        for node in ast.walk(ast.parse(path.read_text()))
        if isinstance(node, ast.Call)
        and isinstance(node.func, ast.Attribute)
        and node.func.attr in ("exec", "execute", "add", "delete", "commit")
        and isinstance(node.func.value, ast.Name)
        and node.func.value.id == "session"
    ]
    assert not sql and not calls, f"{path.name}: {sql + calls}"


@pytest.mark.parametrize("path", SERVICES, ids=lambda p: str(p.relative_to(HUB)))
def test_services_import_no_fastapi(path: Path) -> None:
    assert not [name for name in _imports(path) if name.startswith("fastapi")]


def test_the_hub_imports_nothing_above_it() -> None:
    offenders = {
        str(path.relative_to(HUB)): name
        for path in _modules("*.py")
        for name in _imports(path)
        if name.startswith(_ABOVE)
    }
    assert offenders == {}
