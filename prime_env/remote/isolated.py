"""Environments installed into virtualenvs of their own, and loading them through a worker.

`prime env install` puts an environment whose dependencies clash with this Python's (a
verifiers package pins `openai<3`; the SDK needs `openai>=3.57`), or that is served by another
framework (verifiers), into `<home>/<package>/venv` and records it in
`<home>/<package>/environment.json` (schema `prime.isolated-env/1`); `prime_env.load` finds it
there when the name is not importable here, and drives it through a worker
(`prime_env/worker.py`) started with that virtualenv's Python. `<home>` is `$PRIME_ENVS_HOME`, else `$XDG_DATA_HOME/prime/envs`
(~/.local/share/prime/envs).
"""

from __future__ import annotations

import json
import os
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from registry_index.names import module_name
from registry_index.resolve import parse_env_id

SCHEMA = "prime.isolated-env/1"
RECORD = "environment.json"
KINDS = ("prime_env", "verifiers", "openenv")


def envs_home() -> Path:
    """Where isolated environments live."""
    explicit = os.environ.get("PRIME_ENVS_HOME")
    if explicit:
        return Path(explicit)
    base = os.environ.get("XDG_DATA_HOME") or str(Path.home() / ".local" / "share")
    return Path(base) / "prime" / "envs"


@dataclass(frozen=True)
class IsolatedEnv:
    """One installed isolated environment (its record)."""

    env: str
    """`owner/name` it was installed as."""
    package: str
    version: str
    kind: str
    module: str
    """The import name the worker loads (the package's top-level module)."""
    python: str
    """The virtualenv's interpreter."""
    package_dir: str | None = None
    """Where the package's files are (its recipes), when it is a package directory."""

    def to_json(self) -> dict[str, Any]:
        return {"schema": SCHEMA, **asdict(self)}

    @classmethod
    def read(cls, path: Path) -> IsolatedEnv | None:
        try:
            data = json.loads(path.read_text("utf-8"))
        except (OSError, ValueError):
            return None
        if not isinstance(data, dict) or data.get("schema") != SCHEMA:
            return None
        fields = {k: data.get(k) for k in cls.__dataclass_fields__}
        if not all(isinstance(fields[k], str) for k in ("env", "package", "kind", "module")):
            return None
        return cls(**fields)  # type: ignore[arg-type]


def installed() -> list[IsolatedEnv]:
    home = envs_home()
    if not home.is_dir():
        return []
    found = [IsolatedEnv.read(d / RECORD) for d in sorted(home.iterdir()) if d.is_dir()]
    return [f for f in found if f is not None and Path(f.python).exists()]


def find(name: str) -> IsolatedEnv | None:
    """The isolated environment installed as `name` (`-`/`_` and case alike), if any."""
    wanted = module_name(name)
    for record in installed():
        short = parse_env_id(record.env)[1]
        if wanted in (module_name(short), module_name(record.package), record.module):
            return record
    return None


def load_isolated(record: IsolatedEnv, env_args: dict[str, Any], name: str) -> Any:
    """A RemoteEnvironment over a worker started in the record's virtualenv."""
    from .environment import RemoteEnvironment
    from .process import WorkerProcess

    worker = WorkerProcess(record.python, record.kind, record.module, env_args).start()
    try:
        return RemoteEnvironment(worker, name=name, version=record.version)
    except BaseException:
        worker.stop()
        raise
