"""`prime env push` decisions: refuse unchanged content, hint a bump, resume a cut-off push."""

from __future__ import annotations

from pathlib import Path

import pytest
from rich.console import Console

from hub_client.client import HubClient
from prime_cli.env.project import build_distributions, load_project, write_version
from prime_cli.env.publish import PushRefused, _upload_flow, check_not_published, push_environment
from prime_cli.env.scaffold import create_scaffold
from registry_index.content_hash import tree_content_hash
from registry_index.schemas.push import ResolveRequest, UploadRequest
from registry_index.validation import validate_distribution
from tests.hub_client.wire_examples import version as _version
from tests.hub_server.inproc import InProcessHub


def test_check_not_published(tmp_path: Path) -> None:
    project = load_project(create_scaffold("decide-env", tmp_path))
    assert check_not_published([], project, "alice", "h1") is None
    with pytest.raises(PushRefused, match="nothing to push"):
        check_not_published([_version("0.0.9", "h1", ["wheel", "source"])], project, "alice", "h1")
    with pytest.raises(PushRefused, match=r"e\.g\. to 0\.1\.1"):
        check_not_published([_version("0.1.0", "h0", ["wheel", "source"])], project, "alice", "h1")
    resumed = check_not_published([_version("0.1.0", "h1", ["wheel"])], project, "alice", "h1")
    assert resumed is not None and resumed.kind == "wheel"


def test_push_resumes_after_the_wheel(tmp_path: Path, inproc_hub: InProcessHub) -> None:
    """A push cut off after the wheel (e.g. network loss) is completed by pushing again."""
    project = load_project(create_scaffold("resume-env", tmp_path))
    content_hash = tree_content_hash(project.root)
    built = build_distributions(project, tmp_path / "dist", sdist=False)
    checked = validate_distribution(built.wheel, built.wheel.name)
    with HubClient(
        inproc_hub.url, inproc_hub.admin_token, transport=inproc_hub.transport
    ) as client:
        env_id = client.resolve_environment(ResolveRequest(name="resume-env")).id
        done = _upload_flow(
            client,
            env_id,
            "wheel",
            built.wheel,
            UploadRequest(
                content_hash=content_hash,
                filename=built.wheel.name,
                sha256=checked.sha256,
                size=checked.size,
                semantic_version="0.1.0",
            ),
        )
        assert done.success and [f.kind for f in done.version.files] == ["wheel"]
        result = push_environment(
            client, project, "admin", visibility=None, console=Console(stderr=True)
        )
        assert result.wheel_sha256 == checked.sha256
        versions = client.versions("admin", "resume-env")
        assert sorted(f.kind for f in versions[0].files) == ["source", "wheel"]
        with pytest.raises(PushRefused, match="nothing to push"):
            push_environment(
                client, project, "admin", visibility=None, console=Console(stderr=True)
            )


def test_a_new_environment_asks_who_may_see_it(tmp_path: Path, inproc_hub: InProcessHub) -> None:
    """With no --visibility, a new environment's visibility is asked (the command asks on a
    terminal, default private); an existing one, or one given --visibility, is never asked."""
    project = load_project(create_scaffold("asked-env", tmp_path))
    asked: list[str] = []

    def ask(slug: str) -> str:
        asked.append(slug)
        return "private"

    with HubClient(
        inproc_hub.url, inproc_hub.admin_token, transport=inproc_hub.transport
    ) as client:
        push_environment(client, project, "admin", visibility=None, console=Console(stderr=True),
                         new_visibility=ask)  # fmt: skip
        assert asked == ["admin/asked-env"]
        assert client.environment("admin", "asked-env").visibility.lower() == "private"
        (project.root / "asked_env.py").write_text(
            (project.root / "asked_env.py").read_text() + "\n# changed\n"
        )
        changed = write_version(load_project(project.root), "0.1.1")
        push_environment(client, changed, "admin", visibility=None, console=Console(stderr=True),
                         new_visibility=ask)  # fmt: skip
        assert asked == ["admin/asked-env"]  # not asked again: it exists
    anonymous = inproc_hub.client().get("/api/v1/environmentshub/admin/asked-env/@latest")
    assert anonymous.status_code == 404  # private is invisible to others
