"""`prime env init`: a new environment package that builds, installs, loads and scores as is.

The files come from `prime_cli/env/templates/` (plain `string.Template` files, so they read like
the files they produce). Nothing is written unless every file can be: the package is assembled
in a temporary sibling directory and renamed into place. That directory is made with `mkdir`, so
it gets the user's usual permissions (umask), not the 0700 of `tempfile.mkdtemp`.
"""

from __future__ import annotations

import re
from importlib import resources
from pathlib import Path
from string import Template

import tomli_w
from packaging.utils import canonicalize_name

from registry_index.files import atomic_directory
from registry_index.names import module_name

# A project name that is also an importable module once `-` becomes `_`.
_NAME_RE = re.compile(r"^[a-z][a-z0-9]*(?:[-_][a-z0-9]+)*$")

TASK_COUNT = 5
TEMPLATES: dict[str, dict[str, str]] = {
    # template -> {file written (module/name substituted): template file}
    "single-turn": {
        "pyproject.toml": "pyproject.toml.tmpl",
        "README.md": "README.md.tmpl",
        "${module}.py": "module.py.tmpl",
        ".gitignore": "gitignore.tmpl",
    },
    "mcp": {
        "pyproject.toml": "mcp_pyproject.toml.tmpl",
        "README.md": "mcp_README.md.tmpl",
        "${module}.py": "mcp_module.py.tmpl",
        "${module}_server.py": "mcp_server.py.tmpl",
        ".gitignore": "gitignore.tmpl",
    },
    "openenv": {
        **{
            name: f"openenv/{name}.tmpl"
            for name in (
                "pyproject.toml",
                "README.md",
                "openenv.yaml",
                "__init__.py",
                "client.py",
                "models.py",
                "server/__init__.py",
                "server/app.py",
                "server/requirements.txt",
                "server/Dockerfile",
            )
        },
        "server/${module}_environment.py": "openenv/server/module_environment.py.tmpl",
        ".gitignore": "gitignore.tmpl",
    },
}
"""`prime env init --template`: single-turn (an arithmetic SingleTurn), mcp (a ToolLoop
whose tools an MCP server of the package serves), or openenv (OpenEnv's own echo environment,
as openenv-core 0.3's `openenv init` writes it: a server this hub runs and drives)."""


class ScaffoldError(Exception):
    """The scaffold cannot be created; the message says how to fix the request."""


def check_name(name: str) -> str:
    """Return the normalised environment name or raise ScaffoldError."""
    if not _NAME_RE.match(name.lower()):
        raise ScaffoldError(
            f"invalid environment name {name!r}: use lower-case letters, digits and single "
            "'-' or '_' between them, starting with a letter (e.g. 'my-env')"
        )
    return canonicalize_name(name)


def render(template: str, values: dict[str, str]) -> str:
    text = (resources.files("prime_cli.env") / "templates" / template).read_text("utf-8")
    return Template(text).substitute(values)


def create_scaffold(
    name: str, parent: Path, description: str | None = None, template: str = "single-turn"
) -> Path:
    """Write `parent/NAME/` from `template` (pyproject.toml, README.md, the module and, for
    mcp, its server); return its path."""
    if template not in TEMPLATES:
        raise ScaffoldError(f"unknown template {template!r}; choose one of {', '.join(TEMPLATES)}")
    name = check_name(name)
    module = module_name(name)
    dest = parent / name
    if dest.exists() and (not dest.is_dir() or any(dest.iterdir())):
        raise ScaffoldError(f"{dest} already exists and is not empty; pick another name or --path")
    default = {
        "single-turn": "a single-turn arithmetic environment",
        "mcp": "unit conversions with a tool served by an MCP server",
        "openenv": "an OpenEnv environment that echoes messages",
    }[template]
    description = (description or f"{name}: {default}").strip()
    if not description or "\n" in description or '"""' in description:
        raise ScaffoldError("the description must be one non-empty line without triple quotes")
    values = {
        "name": name,
        "module": module,
        "description": description,
        "description_toml": tomli_w.dumps({"d": description}).split("=", 1)[1].strip(),
        "n_tasks": str(TASK_COUNT),
        "class_name": "".join(part.capitalize() for part in module.split("_")),
        "title": " ".join(part.capitalize() for part in module.split("_")),
    }
    files = {
        Template(target).substitute(values): render(source, values)
        for target, source in TEMPLATES[template].items()
    }
    with atomic_directory(dest) as staging:
        for filename, text in files.items():
            (staging / filename).parent.mkdir(parents=True, exist_ok=True)
            (staging / filename).write_text(text, encoding="utf-8")
    return dest
