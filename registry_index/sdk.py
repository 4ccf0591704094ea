"""The environment SDK's distribution name and the reserved index owner that serves it.

Every environment depends on the SDK by this name. It is not on PyPI, so the hub serves the
wheel of the SDK it runs with at `HUB/{SDK_OWNER}/simple/{SDK_DISTRIBUTION}/`. `SDK_OWNER` is
not a valid user or organisation name (those start with a letter or digit), so no account can
ever own that index, and no one may upload a project under the SDK's name to any owner.
"""

from __future__ import annotations

from registry_index.names import normalize

SDK_DISTRIBUTION = "prime-envhub-sdk"
SDK_OWNER = "_sdk"


def is_sdk_name(name: str) -> bool:
    """True when `name` is the SDK's distribution name in any spelling (`Prime_EnvHub.SDK`)."""
    return normalize(name) == SDK_DISTRIBUTION
