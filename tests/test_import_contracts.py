"""The layering rules of docs/architecture.md hold: import-linter's contracts (pyproject's
[tool.importlinter]) are kept, and no two files of the project import each other, directly or
through others (a cycle makes a module's meaning depend on import order)."""

from __future__ import annotations

import subprocess
import sys
import tomllib
from pathlib import Path

import grimp

ROOT = Path(__file__).resolve().parents[1]
BIN = Path(sys.executable).parent


def _root_packages() -> list[str]:
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())
    return list(config["tool"]["importlinter"]["root_packages"])


def test_the_import_contracts_are_kept() -> None:
    proc = subprocess.run(
        [str(BIN / "lint-imports"), "--no-cache"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=False,
    )
    assert proc.returncode == 0, proc.stdout[-6000:] + proc.stderr[-2000:]
    assert "0 broken" in proc.stdout


def strongly_connected(graph: dict[str, set[str]]) -> list[set[str]]:
    """Tarjan's components of more than one module (iterative: the graph has ~350 nodes)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    on_stack: set[str] = set()
    stack: list[str] = []
    found: list[set[str]] = []
    counter = 0
    for start, children_of_start in graph.items():
        if start in index:
            continue
        work = [(start, iter(sorted(children_of_start)))]
        index[start] = low[start] = counter
        counter += 1
        stack.append(start)
        on_stack.add(start)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = counter
                    counter += 1
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph.get(child, ())))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                parent = work[-1][0]
                low[parent] = min(low[parent], low[node])
            if low[node] == index[node]:
                component = set()
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.add(member)
                    if member == node:
                        break
                if len(component) > 1:
                    found.append(component)
    return found


def test_the_finder_sees_a_cycle() -> None:
    assert strongly_connected({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [{"a", "b", "c"}]
    assert strongly_connected({"a": {"b"}, "b": set()}) == []


def test_no_import_cycles_between_files() -> None:
    """A package's `__init__` re-exporting its modules is not a cycle of files: imports of a
    package's own `__init__` by its submodules are left out, as Python runs `__init__` first."""
    graph = grimp.build_graph(*_root_packages(), include_external_packages=False)
    edges: dict[str, set[str]] = {}
    for module in graph.modules:
        targets = set()
        for imported in graph.find_modules_directly_imported_by(module):
            if module.startswith(imported + "."):
                continue  # a submodule importing its own package's __init__
            targets.add(imported)
        edges[module] = targets
    cycles = strongly_connected(edges)
    assert not cycles, "import cycles between files: " + "; ".join(
        " <-> ".join(sorted(c)) for c in cycles
    )


def test_no_room_of_hub_server_or_prime_env_imports_its_way_back_up() -> None:
    """import-linter's `acyclic_siblings` contract, with one addition: a module that imports
    its root package (`import prime_env`) imports what the root's `__init__` imports. So a
    file of `prime_env/remote/` calling `prime_env.load` while `loading` imports `remote/`
    is a cycle of rooms (a folder or file directly under the root), as a reader sees it."""
    graph = grimp.build_graph(*_root_packages(), include_external_packages=False)
    for root in ("hub_server", "prime_env"):
        exported = {t for t in graph.find_modules_directly_imported_by(root)
                    if t.startswith(root + ".")}  # fmt: skip
        rooms: dict[str, set[str]] = {}
        for module in graph.find_descendants(root):
            for target in graph.find_modules_directly_imported_by(module):
                for reached in exported if target == root else {target}:
                    if reached.startswith(root + "."):
                        here, there = module.split(".")[1], reached.split(".")[1]
                        rooms.setdefault(here, set()).update({there} - {here})
        cycles = strongly_connected(rooms)
        assert not cycles, f"rooms of {root} that import each other: " + "; ".join(
            " <-> ".join(sorted(c)) for c in cycles
        )
