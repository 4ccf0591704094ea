"""`prime env init` produces a package that builds, validates and loads as it is."""

from __future__ import annotations

import importlib.util
import os
import stat
import sys
import tomllib
from pathlib import Path

import pytest
from click.testing import CliRunner

from prime_cli.env.project import build_distributions, load_project
from prime_cli.main import cli
from prime_env import Environment
from registry_index.validation import validate_distribution


def test_init_build_validate_and_load(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    result = CliRunner().invoke(cli, ["env", "init", "demo-math", "--path", str(tmp_path)])
    assert result.exit_code == 0, result.output
    root = tmp_path / "demo-math"
    assert sorted(p.name for p in root.iterdir()) == [
        ".gitignore",
        "README.md",
        "demo_math.py",
        "pyproject.toml",
    ]
    ignored = (root / ".gitignore").read_text().split()
    assert {"build/", "dist/", "*.egg-info/", "outputs/"} <= set(ignored)

    pyproject = tomllib.loads((root / "pyproject.toml").read_text())
    # Environments depend on the light SDK only, never on the hub + CLI distribution.
    assert pyproject["project"]["dependencies"] == ["prime-envhub-sdk>=0.1"]
    entry = pyproject["project"]["entry-points"]["prime.environments"]
    assert entry == {"demo-math": "demo_math:load_environment"}
    readme = (root / "README.md").read_text()
    for section in (
        "Overview",
        "Datasets",
        "Task",
        "Quickstart",
        "Environment Arguments",
        "Metrics",
    ):
        assert f"## {section}" in readme

    project = load_project(root)
    assert (project.name, project.version, project.tags) == (
        "demo-math",
        "0.1.0",
        ["single-turn", "example"],
    )
    built = build_distributions(project, tmp_path / "dist")
    checked = validate_distribution(built.wheel, built.wheel.name)
    assert checked.metadata.name == "demo-math" and str(checked.metadata.version) == "0.1.0"
    assert built.sdist is not None and validate_distribution(built.sdist, built.sdist.name)

    spec = importlib.util.spec_from_file_location("demo_math", root / "demo_math.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    monkeypatch.setitem(sys.modules, "demo_math", module)
    spec.loader.exec_module(module)
    env = module.load_environment(num_examples=2)
    assert isinstance(env, Environment) and len(env.tasks) == 2
    assert module.correct_answer([{"role": "assistant", "content": "It is 42"}], "42") == 1.0
    assert module.correct_answer([{"role": "assistant", "content": "It is 41"}], "42") == 0.0


def test_init_refuses_bad_names_and_existing_dirs(tmp_path: Path) -> None:
    tmp_path = tmp_path / "work"
    tmp_path.mkdir()
    runner = CliRunner()
    bad = runner.invoke(cli, ["env", "init", "../escape", "--path", str(tmp_path)])
    assert bad.exit_code == 1 and "invalid environment name" in bad.output
    (tmp_path / "taken").mkdir()
    (tmp_path / "taken" / "keep.txt").write_text("mine")
    taken = runner.invoke(cli, ["env", "init", "taken", "--path", str(tmp_path)])
    assert taken.exit_code == 1 and "not empty" in taken.output
    assert sorted(p.name for p in (tmp_path / "taken").iterdir()) == ["keep.txt"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["taken"]  # no staging dirs left


def test_load_project_errors(tmp_path: Path) -> None:
    runner = CliRunner()
    missing = runner.invoke(cli, ["env", "build", str(tmp_path)])
    assert missing.exit_code == 1 and "no pyproject.toml" in missing.output
    (tmp_path / "pyproject.toml").write_text('[project]\nname = "x"\nversion = "1.0+local"\n')
    local = runner.invoke(cli, ["env", "build", str(tmp_path)])
    assert local.exit_code == 1 and "local versions" in local.output
    assert "Traceback" not in local.output


def test_init_directory_has_the_usual_permissions(tmp_path: Path) -> None:
    """The new directory follows the umask like `mkdir` (0755 under 022), not mkdtemp's 0700."""
    old = os.umask(0o022)
    try:
        result = CliRunner().invoke(cli, ["env", "init", "perm-env", "--path", str(tmp_path)])
    finally:
        os.umask(old)
    assert result.exit_code == 0, result.output
    assert stat.S_IMODE((tmp_path / "perm-env").stat().st_mode) == 0o755
    assert stat.S_IMODE((tmp_path / "perm-env" / "pyproject.toml").stat().st_mode) == 0o644


def scaffold_mcp(tmp_path: Path) -> Path:
    result = CliRunner().invoke(
        cli, ["env", "init", "unit-tools", "--template", "mcp", "--path", str(tmp_path)]
    )
    assert result.exit_code == 0, result.output
    return tmp_path / "unit-tools"


async def test_init_mcp_template_builds_and_scores_through_its_server(tmp_path: Path) -> None:
    """`--template mcp`: the package ships its MCP server; its tool is offered to the model,
    a right call scores 1.0, a tool error goes back to the model."""
    import json

    from prime_env import load, run_rollouts
    from tests.builtin_envs.policy import PolicyClient, tool_call

    root = scaffold_mcp(tmp_path)
    assert sorted(p.name for p in root.iterdir()) == [
        ".gitignore",
        "README.md",
        "pyproject.toml",
        "unit_tools.py",
        "unit_tools_server.py",
    ]
    pyproject = tomllib.loads((root / "pyproject.toml").read_text())
    assert pyproject["project"]["dependencies"] == ["prime-envhub-sdk[mcp]>=0.1"]
    built = build_distributions(load_project(root), tmp_path / "dist")
    checked = validate_distribution(built.wheel, built.wheel.name)
    assert checked.metadata.name == "unit-tools"
    import zipfile

    names = zipfile.ZipFile(built.wheel).namelist()
    assert {"unit_tools.py", "unit_tools_server.py"} <= set(names)

    conversions = {
        "How many metres are 3.5 km?": (3.5, "km", "m"),
        "How many centimetres are 2 ft?": (2, "ft", "cm"),
        "How many km is 10 mi?": (10, "mi", "km"),
        "How many inches are 254 mm?": (254, "mm", "in"),
        "How many feet are 1 mi?": (1, "mi", "ft"),
    }

    def policy(messages: list[dict]) -> dict | str:
        if messages[-1]["role"] == "tool":
            return f"The answer is {messages[-1]['content']}"
        value, source, target = conversions[messages[-1]["content"]]
        return tool_call("convert", "c1", value=value, from_unit=source, to_unit=target)

    env = load(str(root))
    records = await run_rollouts(env, PolicyClient(policy), concurrency=5)
    assert [r.reward for r in records] == [1.0] * 5
    assert all(r.metrics["tool_calls"] == 1.0 for r in records)
    # its rubric is declared, so the hub checks (and can verify) its runs
    from registry_index.rubric_spec import rubric_from_pyproject

    declared = rubric_from_pyproject(pyproject["tool"]["prime"])
    assert declared is not None
    assert set(declared.root) == {f.name for f in env.rubric.funcs}
    assert all(
        declared.sample_problem(r.reward or 0.0, r.rewards, r.metrics) is None for r in records
    )

    def bad_unit(messages: list[dict]) -> dict | str:
        if messages[-1]["role"] == "tool":
            return json.dumps(messages[-1]["content"])
        return tool_call("convert", "c1", value=1, from_unit="parsec", to_unit="m")

    [record] = await run_rollouts(env, PolicyClient(bad_unit), n=1)
    assert record.error is None and record.reward == 0.0
    assert "unknown unit 'parsec'" in record.completion[1]["content"]


@pytest.mark.slow  # loads SmolLM2-135M (~20 s) and starts the MCP server
def test_init_mcp_template_evaluates_with_the_local_model(tmp_path: Path) -> None:
    from tests.e2e.eval_support import prime, records, run_dirs

    root = scaffold_mcp(tmp_path)
    result = prime(
        "eval",
        "run",
        str(root),
        "-m",
        "local/smollm2-135m",
        "-n",
        "2",
        "--max-tokens",
        "24",
        "-o",
        str(tmp_path / "out"),
        cwd=tmp_path,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    [run] = run_dirs(tmp_path / "out")
    rows = records(run)
    assert {r["example_index"] for r in rows} == {0, 1}
    assert all(r["error"] is None and r["reward"] is not None for r in rows)


def test_a_name_that_is_normalised_is_said_so(tmp_path: Path) -> None:
    result = CliRunner().invoke(cli, ["env", "init", "Bad_Name", "--path", str(tmp_path)])
    assert result.exit_code == 0, result.output
    assert "'Bad_Name' is named 'bad-name'" in result.output and (tmp_path / "bad-name").is_dir()
    plain = CliRunner().invoke(cli, ["env", "init", "good-name", "--path", str(tmp_path)])
    assert plain.exit_code == 0 and "is named" not in plain.output
