"""A requirement that names a project of the environment's own namespace comes from the hub,
in any spelling, or not at all (issue 37): `prime env install` and the hub's verification
resolve it with the same rule; a name the namespace lacks is left to the configured index."""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from packaging.utils import canonicalize_name
from rich.console import Console

from hub_client.client import HubClient
from hub_client.install import InstallError, prepare_install, resolve
from prime_cli.env.project import load_project
from prime_cli.env.publish import push_environment
from prime_cli.env.scaffold import create_scaffold
from registry_index.resolve import parse_env_ref
from tests.hub_server.inproc import InProcessHub, start_inproc_hub


def push(hub: InProcessHub, root: Path, name: str, edit: Callable[[str], str] = str) -> None:
    directory = create_scaffold(name, root)
    pyproject = directory / "pyproject.toml"
    pyproject.write_text(edit(pyproject.read_text()))
    with HubClient(hub.url, hub.admin_token, transport=hub.transport) as client:
        push_environment(client, load_project(directory), "admin", visibility=None,
                         console=Console(stderr=True, quiet=True))  # fmt: skip


def requiring(spec: str) -> Callable[[str], str]:
    return lambda text: text.replace('dependencies = ["prime-envhub-sdk>=0.1"]',
                                     f'dependencies = ["prime-envhub-sdk>=0.1", "{spec}"]')  # fmt: skip


@pytest.fixture(scope="module")
def hub(tmp_path_factory: pytest.TempPathFactory) -> Iterator[InProcessHub]:
    tmp_path = tmp_path_factory.mktemp("namespace")
    with start_inproc_hub(tmp_path / "hub") as running:
        push(
            running,
            tmp_path,
            "helper-lib",
            lambda t: t.replace('version = "0.1.0"', 'version = "1.2"'),
        )
        push(running, tmp_path, "needy", requiring("Helper_Lib>=1"))
        push(running, tmp_path, "greedy", requiring("helper.lib>=2"))
        push(running, tmp_path, "worldly", requiring("packaging>=20"))
        yield running


def plan_for(hub: InProcessHub, ref: str) -> list[str]:
    with HubClient(hub.url, hub.admin_token, transport=hub.transport) as client:
        plan = prepare_install(client, [resolve(client, parse_env_ref(ref))], sys.executable)
    return sorted(canonicalize_name(name) for name in plan.wheels)


def test_a_namespace_dependency_in_another_spelling_comes_from_the_hub(hub: InProcessHub) -> None:
    assert plan_for(hub, "admin/needy") == ["helper-lib", "needy"]


def test_a_namespace_dependency_without_a_fitting_version_is_never_looked_up_elsewhere(
    hub: InProcessHub,
) -> None:
    with pytest.raises(InstallError, match="never looked up on another index") as refused:
        plan_for(hub, "admin/greedy")
    assert "helper.lib>=2" in str(refused.value) and "1.2" in str(refused.value)


def test_a_name_the_namespace_lacks_is_left_to_the_index(hub: InProcessHub) -> None:
    assert plan_for(hub, "admin/worldly") == ["worldly"]
