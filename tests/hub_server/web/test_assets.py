"""Every asset a page needs is served by the hub itself: no CDN (in-process)."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from hub_server.app import create_app
from hub_server.core.settings import HubSettings


@pytest.fixture(scope="module")
def client(tmp_path_factory: pytest.TempPathFactory) -> Iterator[TestClient]:
    settings = HubSettings(data_dir=Path(tmp_path_factory.mktemp("assets")))
    with TestClient(create_app(settings)) as test_client:
        yield test_client


@pytest.mark.parametrize("path", ["/docs", "/redoc", "/", "/login"])
def test_pages_load_scripts_and_styles_from_the_hub_only(client: TestClient, path: str) -> None:
    page = client.get(path)
    assert page.status_code == 200
    assets = re.findall(r'(?:src|href)=["\']([^"\']+\.(?:js|css|png))["\']', page.text)
    assert assets, f"{path} references no assets"
    for asset in assets:
        assert asset.startswith("/"), f"{path} loads {asset} from elsewhere"
        response = client.get(asset)
        assert response.status_code == 200 and len(response.content) > 100, asset
