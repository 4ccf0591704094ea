"""trainer_bridge's layout holds: no import cycles between its files, and each part imports only
the parts below it (protocol at the bottom; the orchestrator never the trainer, nor torch).

Every import counts, lazy ones inside functions and TYPE_CHECKING ones too."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[2] / "trainer_bridge"


def module_name(path: Path) -> str:
    parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


MODULES = {module_name(p): p for p in PACKAGE.rglob("*.py")}


def imported(name: str) -> set[str]:
    """Every module `name` imports, by its full dotted name (third-party ones included)."""
    path = MODULES[name]
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    out: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            out.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*anchor, *([node.module] if node.module else [])])
            out.add(base)
            out.update(f"{base}.{alias.name}" for alias in node.names)
    return out


def internal(name: str) -> set[str]:
    """The trainer_bridge modules `name` imports (a name imported from a module is the module)."""
    found = set()
    for target in imported(name):
        while target and target not in MODULES:
            target = target.rpartition(".")[0]
        if target and target != name:
            found.add(target)
    return found


def cycles() -> list[list[str]]:
    graph = {name: internal(name) for name in MODULES}
    found: list[list[str]] = []
    state: dict[str, int] = {}  # 1: on the current path, 2: done
    path: list[str] = []

    def visit(node: str) -> None:
        state[node] = 1
        path.append(node)
        for nxt in sorted(graph[node]):
            if state.get(nxt) == 1:
                found.append([*path[path.index(nxt) :], nxt])
            elif nxt not in state:
                visit(nxt)
        path.pop()
        state[node] = 2

    for name in sorted(graph):
        if name not in state:
            visit(name)
    return found


def test_no_import_cycles_between_files() -> None:
    assert len(MODULES) > 30  # the walk found the package
    assert cycles() == []


def test_a_planted_cycle_is_found(monkeypatch: pytest.MonkeyPatch) -> None:
    graph = {"a": {"b"}, "b": {"a"}}
    monkeypatch.setattr(f"{__name__}.MODULES", dict.fromkeys(graph, PACKAGE))
    monkeypatch.setattr(f"{__name__}.internal", lambda name: graph[name])
    assert cycles() == [["a", "b", "a"]]


# part -> the trainer_bridge parts it must not import (docs/training.md, Code layout)
FORBIDDEN = {
    "trainer_bridge.config": ["config_loader", "protocol", "checkpoints", "orchestrator", "trainer", "inference",
                              "launch", "metrics", "children", "shutdown", "export", "usage"],
    "trainer_bridge.config_loader": ["protocol", "checkpoints", "orchestrator", "trainer",
                                     "inference", "launch", "metrics", "children", "shutdown",
                                     "export", "usage"],
    "trainer_bridge.protocol": ["checkpoints", "config", "orchestrator", "trainer", "inference",
                                "launch", "metrics", "children", "shutdown", "export"],
    "trainer_bridge.checkpoints": ["orchestrator", "trainer", "inference", "launch"],
    "trainer_bridge.trainer": ["orchestrator", "inference", "launch", "metrics", "children"],
    "trainer_bridge.orchestrator": ["trainer", "launch", "shutdown"],
    "trainer_bridge.inference": ["orchestrator", "launch"],
    "trainer_bridge.lab": ["orchestrator", "inference", "launch"],
}  # fmt: skip


@pytest.mark.parametrize("part", sorted(FORBIDDEN))
def test_each_part_imports_only_what_is_below_it(part: str) -> None:
    banned = tuple(f"trainer_bridge.{name}" for name in FORBIDDEN[part])
    wrong = sorted(
        f"{name} imports {target}"
        for name in MODULES
        if name == part or name.startswith(part + ".")
        for target in internal(name)
        if any(target == b or target.startswith(b + ".") for b in banned)
    )
    assert wrong == []


def test_the_orchestrator_never_imports_torch() -> None:
    """The orchestrator process samples through a backend; only the trainer and the torch
    backend load a model."""
    wrong = sorted(
        f"{name} imports {target}"
        for name in MODULES
        if name.startswith("trainer_bridge.orchestrator")
        for target in imported(name)
        if target.split(".")[0] in ("torch", "transformers", "peft", "safetensors")
    )
    assert wrong == []
