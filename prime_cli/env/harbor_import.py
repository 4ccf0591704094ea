"""`prime env import harbor DIR -o NAME`: a directory of Harbor tasks as an environment package.

The package holds the task directories unchanged (under `<module>/tasks/`) and a
`load_environment` that hands them to prime_env.harbor. Before anything is written, every task
is read and its image built here (or found), so a task that names a base image this machine does
not have is refused with the image's name, and nothing is left half-written: the package is
assembled in a temporary sibling directory and renamed into place.
"""

from __future__ import annotations

import shutil
from collections.abc import Callable
from pathlib import Path

import tomli_w

from prime_cli.env.scaffold import ScaffoldError, check_name, render
from prime_env.harbor import HarborFormatError, HarborTask, read_tasks
from prime_env.harbor.environment import prepare_container
from registry_index.files import atomic_directory
from registry_index.names import module_name


class HarborImportError(Exception):
    """The directory cannot be imported; the message says why and what to do."""


def import_harbor(
    source: Path,
    dest: Path,
    *,
    description: str | None = None,
    say: Callable[[str], None] = lambda _message: None,
) -> tuple[Path, list[HarborTask]]:
    """Write the environment package `dest` (its name is dest's) from the tasks in `source`."""
    from sandbox.errors import SandboxError

    source = source.resolve()
    try:
        name = check_name(dest.name)
    except ScaffoldError as exc:
        raise HarborImportError(f"{exc} (the name is the last part of -o)") from None
    if dest.exists() and (not dest.is_dir() or any(dest.iterdir())):
        raise HarborImportError(f"{dest} already exists and is not empty; choose another -o")
    try:
        tasks = read_tasks(source)
        for task in tasks:
            prepare_container(task, say)
    except (HarborFormatError, SandboxError) as exc:
        raise HarborImportError(str(exc)) from None
    module = module_name(name)
    description = (description or f"{name}: {len(tasks)} Harbor task(s)").strip()
    if not description or "\n" in description or '"""' in description:
        raise HarborImportError("the description must be one line without triple quotes")
    rows = "\n".join(
        f"| {t.name} | {'solution/solve.sh' if t.solution_dir else '-'} |" for t in tasks
    )
    values = {
        "name": name,
        "module": module,
        "description": description,
        "description_toml": tomli_w.dumps({"d": description}).split("=", 1)[1].strip(),
        "task_rows": rows,
    }
    with atomic_directory(dest) as staging:
        (staging / module / "tasks").mkdir(parents=True)
        (staging / "pyproject.toml").write_text(render("harbor_pyproject.toml.tmpl", values))
        (staging / "README.md").write_text(render("harbor_README.md.tmpl", values))
        (staging / ".gitignore").write_text(render("gitignore.tmpl", values))
        (staging / module / "__init__.py").write_text(render("harbor_module.py.tmpl", values))
        for task in tasks:
            where = task.path.relative_to(source) if task.path != source else task.path.name
            shutil.copytree(
                task.path,
                staging / module / "tasks" / where,
                symlinks=False,
                ignore=shutil.ignore_patterns("__pycache__", "*.pyc"),
            )
    return dest, tasks
