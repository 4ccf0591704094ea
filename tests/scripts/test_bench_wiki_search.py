"""bench_wiki_search's reading of a run and its section in docs/benchmarks.md, on a run dir made
here (the bench itself trains for most of an hour: it is run by hand, never by the suite)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from scripts import bench_wiki_search as bench


def fake_run(run: Path, curve: list[tuple[int, float, int]]) -> Path:
    """A finished run: (step, exact match, held-out rollouts calling a tool of 4) per eval."""
    (run / "evals").mkdir(parents=True)
    (run / "run.json").write_text(json.dumps({"status": "completed"}))
    evals = []
    for step, exact, called in curve:
        records = [{"metrics": {"tool_calls": 3.0 if i < called else 0.0}} for i in range(4)]
        (run / "evals" / f"step_{step}").mkdir()
        (run / "evals" / f"step_{step}" / "results.jsonl").write_text(
            "".join(json.dumps(r) + "\n" for r in records)
        )
        evals.append({"policy": step, "eval/exact_match": exact, "cpu_s": 100.0 * (step + 1)})
    (run / "evals.jsonl").write_text("".join(json.dumps(e) + "\n" for e in evals))
    steps = [
        {"step": 0, "stage/name": "sft-reference", "trainer/train_cpu_s": 70.0,
         "trainer/peak_rss_mb": 5000.0, "perf/cpu_s_total": 900.0},
        {"step": 1, "stage/name": "grpo", "trainer/train_cpu_s": 80.0,
         "mem/orchestrator_peak_rss_mb": 3000.0, "perf/cpu_s_total": 1500.0},
    ]  # fmt: skip
    (run / "metrics.jsonl").write_text("".join(json.dumps(s) + "\n" for s in steps))
    return run


def test_the_report_reads_the_curve_tool_use_and_the_bars(tmp_path: Path) -> None:
    run = fake_run(tmp_path / "run", [(0, 0.0, 0), (8, 0.3, 4), (14, 0.35, 3)])
    result = bench.read_result(run, None, 0.0, 60.0)
    assert [(e.step, e.tool_share) for e in result.evals] == [(0, 0.0), (8, 1.0), (14, 0.75)]
    assert result.cpu_s == 1500.0  # the run's own account: its last step's
    assert result.peak_rss_gb == pytest.approx(5000 / 1024)
    met = bench.bars(result)
    assert "+0.30 at the lower" in met[0] and met[0].endswith("**met**")
    assert met[1].endswith("**missed**")  # 75% at step 14 < 80%
    assert met[2].endswith("**met**") and met[3].endswith("**met**")


def test_the_section_goes_before_issue_23s_then_replaces_itself(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    docs = tmp_path / "benchmarks.md"
    docs.write_text(f"# Benchmarks\n## Training\n\n{bench.BEFORE} (x)\n\nold\n## Next\n")
    monkeypatch.setattr(bench, "DOCS", docs)
    result = bench.read_result(fake_run(tmp_path / "run", [(0, 0.0, 0), (8, 0.5, 4)]), None, 0.0, 1.0)  # fmt: skip
    for _ in range(2):
        bench.write_docs(bench.report(result, "python scripts/bench_wiki_search.py"))
    text = docs.read_text()
    assert text.count(bench.HEADING) == 1
    assert text.index(bench.HEADING) < text.index(bench.BEFORE) < text.index("## Next")
    assert "| 8 | 0.50 | 100% (4 of 4) |" in text
