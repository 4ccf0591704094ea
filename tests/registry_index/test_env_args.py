"""Reading `load_environment`'s arguments from a wheel's source, without running it."""

from __future__ import annotations

import io
import zipfile

from registry_index.env_args import EnvArg, read_env_signature

SOURCE = '''
import os

os.system("touch /tmp/should-never-run")


def helper(x):
    return x


def make(difficulty: int = 3, *, seed: int | None = None, tools: list[str] = ["calc"], name="x", required_arg):
    """Arithmetic problems.

    Args:
        difficulty: 1 (one-digit sums) to 5.
        seed: Seed of the problem generator.
    """
'''.replace(", required_arg)", ", required_arg: str)")


def wheel(members: dict[str, str]) -> io.BytesIO:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        for name, text in members.items():
            archive.writestr(name, text)
    buffer.seek(0)
    return buffer


def test_entry_point_loader_with_documented_arguments() -> None:
    signature = read_env_signature(
        wheel(
            {
                "maths/__init__.py": SOURCE,
                "maths-1.0.dist-info/entry_points.txt": "[prime.environments]\nmaths = maths:make\n",
            }
        )
    )
    assert signature is not None and signature.loader == "maths:make"
    assert signature.summary == "Arithmetic problems."
    assert signature.args == [
        EnvArg("difficulty", "int", "3", "1 (one-digit sums) to 5."),
        EnvArg("seed", "int | None", "None", "Seed of the problem generator."),
        EnvArg("tools", "list[str]", "['calc']", None),
        EnvArg("name", None, "'x'", None),
        EnvArg("required_arg", "str", None, None),
    ]


def test_default_loader_name_in_the_single_top_level_module() -> None:
    source = "def load_environment(n: int = 1):\n    pass\n"
    signature = read_env_signature(
        wheel({"solo/__init__.py": source, "solo-1.dist-info/METADATA": ""})
    )
    assert signature is not None and [a.name for a in signature.args] == ["n"]


def test_missing_or_broken_sources_give_none() -> None:
    assert read_env_signature(wheel({"a/__init__.py": "def load_environment(:\n"})) is None
    assert read_env_signature(wheel({"a/__init__.py": "X = 1\n"})) is None
    assert read_env_signature(io.BytesIO(b"not a zip")) is None
