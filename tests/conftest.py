"""Shared test configuration. Fixtures that belong to one layer live in that layer's conftest.

Parallel runs (scripts/test.sh: `pytest -n 4 --dist loadgroup`; docs/architecture.md, Testing):
a test module is one unit of work, as in a serial run: its module-scoped fixtures (hubs, a
seeded hub, moto, PostgreSQL) start once and its tests run in order in one worker. A test that
shares something global with tests of other modules (a Docker-wide count, the project's .venv)
takes `@pytest.mark.xdist_group("name")`: every test of that group runs in one worker, one at a
time. Everything else is isolated per worker: tmp_path, free_port's range, the owner-pid and
run-id labels of sandboxes.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

import pytest

from engines.install import ENGINES_DIR_ENV, engines_root
from local_model.models import CACHE_ENV, cache_root

if TYPE_CHECKING:
    from tests.hub_server.hubproc import HubProcess
    from tests.hub_server.inproc import InProcessHub

# Many tests give the CLI a throwaway HOME; the converted local model (a 0.5 GB cache that
# saves 20 s per load) should still be shared, as it is on a user's machine. Pinned here,
# before any test changes HOME, and inherited by every subprocess the tests start. Workers
# converting it at once is safe: the conversion is written aside and renamed into place.
os.environ.setdefault(CACHE_ENV, str(cache_root()))
# The same for the engines `prime engine install` put under the real HOME (vLLM: 3.5 GB).
os.environ.setdefault(ENGINES_DIR_ENV, str(engines_root()))
# One OpenMP thread per torch process (the workers and every process they start, as pytest-xdist
# suites of numeric code do): the workers already fill the cores, and a second thread per test
# spins against them (in-process torch tests: 18% less CPU for 14% more wall, measured alone).
# The trainer and the local model set their own thread counts from their configs regardless.
os.environ.setdefault("OMP_NUM_THREADS", "1")


def pytest_configure(config: pytest.Config) -> None:
    # `-n N` alone means xdist's `--dist load`: a module's tests spread over workers and
    # xdist_group ignored. This suite's groups are what make it safe, so it is loadgroup here.
    if getattr(config.option, "dist", "no") == "load":
        config.option.dist = "loadgroup"
    if getattr(config.option, "dist", "no") == "loadgroup":
        # Units are handed out in collection order (see pytest_collection_modifyitems), not
        # xdist's default of most tests first, which puts a module of two long tests last.
        config.option.loadscopereorder = False


def _unit(item: pytest.Item) -> str:
    """The unit of work `item` belongs to under loadgroup: its xdist_group, else its module."""
    mark = item.get_closest_marker("xdist_group")
    if mark is not None:
        return str(mark.args[0] if mark.args else mark.kwargs.get("name", "default"))
    return item.nodeid.split("::", 1)[0]


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """In an xdist worker, units that hold a `slow` test come first (in collection order).

    Long units started first end together; one started last keeps a worker busy while the
    other has nothing left (e2e/test_train_hub's two training tests, 7 minutes, hold two
    tests, so xdist's own order, most tests first, puts them near the end). Every worker sorts
    the same collection the same way, as xdist requires.
    """
    if "PYTEST_XDIST_WORKER" not in os.environ:
        return
    slow = {_unit(item) for item in items if item.get_closest_marker("slow")}
    items.sort(key=lambda item: _unit(item) not in slow)  # stable: collection order otherwise


@pytest.hookimpl(tryfirst=True, optionalhook=True)
def pytest_xdist_make_scheduler(config: pytest.Config, log: Any) -> Any:
    """loadgroup with a module, not a single test, as the unit of a test without a group."""
    if config.getvalue("dist") != "loadgroup":
        return None
    from xdist.scheduler import LoadGroupScheduling

    class ModuleScheduling(LoadGroupScheduling):  # type: ignore[misc]
        def _split_scope(self, nodeid: str) -> str:
            group = super()._split_scope(nodeid)  # "name" for "...::test@name", else the nodeid
            return group if group != nodeid else nodeid.split("::", 1)[0]

    return ModuleScheduling(config, log)


@pytest.fixture(scope="module")
def hub(tmp_path_factory: pytest.TempPathFactory) -> Iterator[HubProcess]:
    """One real `prime hub serve` per test module that asks for it (tests use distinct user and
    project names); a module with a hub of another kind defines its own `hub`."""
    from tests.hub_server.hubproc import start_hub

    with start_hub(tmp_path_factory.mktemp("hub")) as running:
        yield running


@pytest.fixture(scope="module")
def inproc_hub(tmp_path_factory: pytest.TempPathFactory) -> Iterator[InProcessHub]:
    """One in-process hub per test module (tests/hub_server/inproc.py: route logic, no socket),
    for every layer's tests that talk to a hub; tests use distinct user/project names."""
    from tests.hub_server.inproc import start_inproc_hub

    with start_inproc_hub(tmp_path_factory.mktemp("hub")) as running:
        yield running
