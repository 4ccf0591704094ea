"""The install commands we show people, pinned so that no name the hub owns can come from PyPI.

A resolver that sees one name on two indexes may take the higher version from either: with
`pip --extra-index-url <public index>`, PyPI's unrelated `wordle 0.2.1` beat the hub's
`wordle 0.1.0`. So every command printed by the hub's pages, `prime hub seed` and the docs
comes from here, and each one pins the hub's names to the hub:

- `prime env install` resolves the environment on the hub and installs with the hub's index
  first (see hub_client.install);
- uv: the hub's indexes given with `--index` take priority over the default index, and
  `--index-strategy first-index` (uv's default, spelled out so that a uv.toml saying otherwise
  cannot undo it) takes every package only from the first index that has it, so the
  environment and the SDK come from the hub and only their other dependencies from PyPI;
- pip has no index priority at all, so the pip line names the exact wheel URLs of the
  environment and of the SDK: pip then never looks those two names up on any index.
"""

from __future__ import annotations

from dataclasses import dataclass

from registry_index.sdk import SDK_OWNER


@dataclass(frozen=True)
class InstallCommand:
    tool: str  # "prime" | "uv" | "pip"
    command: str
    note: str


def owner_index_url(hub_url: str, owner: str) -> str:
    return f"{hub_url.rstrip('/')}/{owner}/simple/"


def sdk_index_url(hub_url: str) -> str:
    return owner_index_url(hub_url, SDK_OWNER)


def install_commands(
    hub_url: str,
    owner: str,
    name: str,
    version: str | None = None,
    *,
    wheel_url: str | None = None,
    sdk_wheel_url: str | None = None,
) -> list[InstallCommand]:
    """The commands for `owner/name` (at `version` when given), safest first."""
    pinned = f"{name}=={version}" if version else name
    commands = [
        InstallCommand(
            "prime",
            f"prime env install {owner}/{name}" + (f"@{version}" if version else ""),
            "Installs into the current environment from this hub and checks what it serves.",
        ),
        InstallCommand(
            "uv",
            f"uv pip install --index-strategy first-index --index {owner_index_url(hub_url, owner)} "
            f"--index {sdk_index_url(hub_url)} {pinned}",
            "The environment and its SDK come only from this hub; other dependencies from PyPI.",
        ),
    ]
    if wheel_url and sdk_wheel_url:
        commands.append(
            InstallCommand(
                "pip",
                f"pip install {sdk_wheel_url} {wheel_url}",
                "pip cannot prefer one index, so the two wheels this hub owns are named by URL.",
            )
        )
    return commands
