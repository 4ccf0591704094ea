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


def _loader_wheel(source: str) -> io.BytesIO:
    return wheel({"hostile/__init__.py": source})


HOSTILE = {
    "150,000-term module expression": "X = " + "+".join(["1"] * 150_000) + "\n"
    "def load_environment(n: int = 1):\n    pass\n",
    "150,000-term default": "def load_environment(n="
    + "+".join(["1"] * 150_000)
    + "):\n    pass\n",
    "5,000 nested parentheses": "X = " + "(" * 5000 + ")" * 5000 + "\n",
    "NUL byte": "def load_environment(n=1):\n    pass\n\x00",
}


def test_hostile_source_gives_no_signature_instead_of_an_error() -> None:
    """Issue 26, class 9: the parser's RecursionError (and MemoryError) on a hostile module
    came out of read_env_signature, and the environment page answered 500 on every view."""
    for case, source in HOSTILE.items():
        assert read_env_signature(_loader_wheel(source)) is None, case


def test_what_is_shown_of_a_signature_is_bounded() -> None:
    deep = "+".join(["1"] * 900)  # parses, but unparsing it recurses past the limit
    arguments = ", ".join(f"a{i}: int = {deep if i == 0 else i}" for i in range(500))
    source = (
        f"def load_environment({arguments}):\n"
        f'    """{"word " * 20_000}\n\n    Args:\n        a1: {"x" * 5000}\n    """\n'
    )
    signature = read_env_signature(_loader_wheel(source))
    assert signature is not None
    assert len(signature.args) == 64
    assert signature.args[0].default is not None and len(signature.args[0].default) <= 200
    assert all(len(a.description or "") <= 200 for a in signature.args)
    assert len(signature.summary or "") <= 200
