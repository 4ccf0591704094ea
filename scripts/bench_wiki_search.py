"""`prime train prime/wiki-search` with no flags on SmolLM2-135M (issue 24), as a user runs it.

    python scripts/bench_wiki_search.py [--out DIR] [--write-docs]
    python scripts/bench_wiki_search.py --report RUN_DIR [--write-docs]

Starts a local hub (`prime hub serve` on a free loopback port, its data and the CLI's settings
in a temporary directory, so ~/.config/prime is never touched), seeds it with the built-ins
(`prime hub seed`), logs in, and runs the bare command in OUT: `prime train prime/wiki-search`
installs the environment from the hub and trains with its shipped recipe
(`wiki_search/train/smollm2-135m.toml`). The environment it installed into this venv is
uninstalled again at the end when it was not there before.

Prints (and with `--write-docs` writes into docs/benchmarks.md) per held-out eval the exact
match and the share of rollouts that called a tool, with the CPU-s the run had used then; per
step the stage, the trainer's CPU-s and trained tokens; the command's CPU-s (user + sys of its
whole process tree, wait4), the peak RSS (the largest process: wait4's, and the trainer's own
figure), the load meanwhile, and issue 24's bars. `--report RUN_DIR` reads a finished run
instead (its CPU-s then from the run's own `perf/cpu_s_total` and evals).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import socket
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from scripts.bench_train import PRIME, ROOT, Load, rows

COMMAND = ["train", "prime/wiki-search"]
DISTRIBUTION = "wiki-search"
DOCS = ROOT / "docs" / "benchmarks.md"
HEADING = "### Issue 24: `prime train prime/wiki-search` with no flags"
BEFORE = "### Issue 23: the recipe with no flags"
"""The section goes before this one when it is not in the file yet."""
MEASURED = "bench_wiki_search.json"
"""What the bench measured around the run (wait4, load), kept in the run dir for --report."""
CPU_BAR, RSS_BAR_GB, GAIN_BAR, TOOL_BAR = 3600.0, 8.0, 0.25, 0.8


@dataclass
class Eval:
    step: int
    exact_match: float
    tool_share: float
    rollouts: int
    cpu_s: float


@dataclass
class Result:
    run: Path
    evals: list[Eval]
    steps: list[dict[str, Any]]
    cpu_s: float
    peak_rss_gb: float
    trainer_rss_gb: float
    wall_s: float
    status: str
    ended: str = ""
    load: str = ""
    notes: list[str] = field(default_factory=list)


def read_evals(run: Path) -> list[Eval]:
    """Each held-out eval: exact match from `evals.jsonl`, tool use from its own records."""
    out = []
    for row in rows(run, "evals.jsonl"):
        step = int(row["policy"])
        records = [
            json.loads(line)
            for line in (run / "evals" / f"step_{step}" / "results.jsonl").read_text().splitlines()
            if line.strip()
        ]
        called = sum(1 for r in records if (r.get("metrics") or {}).get("tool_calls", 0) > 0)
        out.append(
            Eval(
                step,
                float(row["eval/exact_match"]),
                called / max(len(records), 1),
                len(records),
                float(row["cpu_s"]),
            )
        )
    return out


def read_result(run: Path, cpu_s: float | None, rss_gb: float, wall_s: float) -> Result:
    steps = rows(run, "metrics.jsonl")
    trainer_rss = max((float(m.get("trainer/peak_rss_mb") or 0.0) for m in steps), default=0.0)
    orchestrator_rss = max(
        (float(m.get("mem/orchestrator_peak_rss_mb") or 0.0) for m in steps), default=0.0
    )
    evals = read_evals(run)
    if cpu_s is None:  # --report: the run's own account (the last step's, or the last eval's)
        cpu_s = max([float(m.get("perf/cpu_s_total") or 0.0) for m in steps] + [e.cpu_s for e in evals])  # fmt: skip
    meta = json.loads((run / "run.json").read_text())
    status, ended = meta.get("status", "?"), meta.get("updated_at", "?")
    peak = max(rss_gb, trainer_rss / 1024, orchestrator_rss / 1024)
    return Result(run, evals, steps, cpu_s, peak, trainer_rss / 1024, wall_s, status, ended)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def prime(*args: str, env: dict[str, str], cwd: Path | None = None) -> str:
    result = subprocess.run(
        [str(PRIME), *args], env=env, cwd=cwd, text=True, capture_output=True, check=False
    )
    if result.returncode != 0:
        sys.exit(f"prime {' '.join(args)} failed ({result.returncode}):\n{result.stderr[-3000:]}")
    return result.stdout


def installed(env: dict[str, str]) -> bool:
    probe = [sys.executable, "-c", f"import importlib.metadata as m; m.version({DISTRIBUTION!r})"]
    return subprocess.run(probe, env=env, capture_output=True, check=False).returncode == 0


def start_hub(work: Path, env: dict[str, str]) -> tuple[subprocess.Popen[bytes], str]:
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    log = (work / "hub.log").open("wb")
    command = [str(PRIME), "hub", "serve", "--host", "127.0.0.1", "--port", str(port)]
    hub = subprocess.Popen([*command, "--data-dir", str(work / "hub-data")], env=env, stdout=log, stderr=subprocess.STDOUT)  # fmt: skip
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        if hub.poll() is not None:
            sys.exit(f"the hub exited during start-up:\n{(work / 'hub.log').read_text()[-3000:]}")
        with contextlib.suppress(httpx.HTTPError):  # not listening yet: ask again
            if httpx.get(f"{url}/healthz", timeout=2).status_code == 200:
                return hub, url
        time.sleep(0.3)
    hub.kill()
    sys.exit("the hub did not answer within 120 s")


def run_dirs(out: Path) -> set[Path]:
    """The training runs under OUT's ./outputs (outputs/train/ENV--MODEL/RUN_ID)."""
    return {p.parent for p in (out / "outputs").rglob("run.json")}


def bench(out: Path) -> Result:
    """The hub, seeded; then the bare command in OUT, measured with wait4."""
    out.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix="bench-wiki-search-"))
    env = dict(os.environ, XDG_CONFIG_HOME=str(work / "config"), PYTHONPATH=str(ROOT))
    for name in ("PRIME_HUB_URL", "PRIME_API_BASE_URL", "PRIME_BASE_URL", "PRIME_API_KEY", "PRIME_OWNER"):  # fmt: skip
        env.pop(name, None)
    was_installed = installed(env)
    hub, url = start_hub(work, env)
    try:
        data = str(work / "hub-data")
        prime("hub", "user", "add", "bench", "--data-dir", data, env=env)
        token = prime("hub", "token", "create", "bench", "--data-dir", data, env=env).split()[-1]
        prime("login", "--url", url, "--token", token, env=env)
        prime("hub", "seed", "--url", url, "--data-dir", data, env=env)
        print(f"hub {url} seeded; running `prime {' '.join(COMMAND)}` in {out}", flush=True)
        load = Load()
        started = time.monotonic()
        before = run_dirs(out)
        with (out / "train.out").open("w") as stdout, (out / "train.log").open("w") as stderr:
            process = subprocess.Popen([str(PRIME), *COMMAND], cwd=out, env=env, stdout=stdout, stderr=stderr)  # fmt: skip
            _, status, usage = os.wait4(process.pid, 0)
        wall = time.monotonic() - started
        code = os.waitstatus_to_exitcode(status)
        load_text = load.stop()
        runs = sorted(run_dirs(out) - before)
        if code != 0 or len(runs) != 1:
            sys.exit(f"prime train exited {code}:\n{(out / 'train.log').read_text()[-3000:]}")
        result = read_result(
            runs[0], usage.ru_utime + usage.ru_stime, usage.ru_maxrss / 1024 / 1024, wall
        )
        result.load = load_text
        result.notes.append(f"user {usage.ru_utime:.0f} + system {usage.ru_stime:.0f} CPU-s")
        measured: dict[str, Any] = {"cpu_s": result.cpu_s, "peak_rss_gb": result.peak_rss_gb}
        measured |= {"wall_s": wall, "load": result.load, "notes": result.notes}
        (result.run / MEASURED).write_text(json.dumps(measured, indent=1) + "\n")
        return result
    finally:
        hub.terminate()
        hub.wait(30)
        if not was_installed and installed(env):
            uv = Path(sys.executable).with_name("uv")
            subprocess.run([str(uv), "pip", "uninstall", "--quiet", "--python", sys.executable, DISTRIBUTION], check=False)  # fmt: skip


def bars(result: Result) -> list[str]:
    evals = result.evals
    start = evals[0].exact_match if evals else 0.0
    last = evals[-2:]
    gain = min((e.exact_match for e in last), default=0.0) - start
    tools = min((e.tool_share for e in last), default=0.0)

    def met(ok: bool) -> str:
        return "**met**" if ok else "**missed**"

    return [
        (
            f"- held-out exact match at each of the last two evals >= step 0 + {GAIN_BAR}: "
            f"+{gain:.2f} at the lower ({', '.join(f'step {e.step}: {e.exact_match:.2f}' for e in last)}; "
            f"step 0: {start:.2f}): {met(len(last) == 2 and gain >= GAIN_BAR)}"
        ),
        (
            f"- >= {TOOL_BAR:.0%} of held-out rollouts call a tool (last two evals): "
            f"{', '.join(f'{e.tool_share:.0%}' for e in last)}: {met(len(last) == 2 and tools >= TOOL_BAR)}"
        ),
        f"- <= {CPU_BAR:,.0f} CPU-s for all processes: {result.cpu_s:,.0f}: {met(result.cpu_s <= CPU_BAR)}",
        (
            f"- peak RSS <= {RSS_BAR_GB:.0f} GB: {result.peak_rss_gb:.2f} GB (trainer "
            f"{result.trainer_rss_gb:.2f} GB): {met(result.peak_rss_gb <= RSS_BAR_GB)}"
        ),
    ]


def report(result: Result, command: str) -> str:
    """The section for docs/benchmarks.md (also printed)."""
    lines = [
        HEADING,
        "",
        (
            f"`{command}`, run `{result.run.name}` (ended {result.ended}): "
            f"`prime {' '.join(COMMAND)}` with no flags, from a local hub seeded with the built-ins "
            f"(it installed the environment and used its recipe for `local/smollm2-135m`); run "
            f"status `{result.status}`, {result.wall_s / 60:.0f} min wall; {result.load}."
        ),
        "",
        "| held-out eval (20 questions, greedy) at step | exact match | rollouts calling a tool | CPU-s of the run then |",
        "|---|---|---|---|",
    ]
    for e in result.evals:
        lines.append(f"| {e.step} | {e.exact_match:.2f} | {e.tool_share:.0%} ({round(e.tool_share * e.rollouts)} of {e.rollouts}) | {e.cpu_s:,.0f} |")  # fmt: skip
    lines += [
        "",
        "| step | stage | groups sampled | trained rollouts | trainer CPU-s | run CPU-s at its end (orchestrator) | train reward | ce_loss |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for m in result.steps:
        lines.append(
            f"| {m['step']} | {m.get('stage/name', '')} | {int(m.get('batch/groups_seen') or 0)} | "
            f"{int(m.get('batch/rollouts') or 0)} | {float(m.get('trainer/train_cpu_s') or 0):.0f} | "
            f"{float(m.get('perf/cpu_s_total') or 0):,.0f} ({float(m.get('perf/cpu_s_orchestrator') or 0):,.0f}) | "
            f"{float(m.get('reward/train_mean') or 0):.2f} | {float(m.get('trainer/ce_loss') or 0):.3f} |"
        )
    lines += [
        "",
        (
            f"All processes: **{result.cpu_s:,.0f} CPU-s** ({'; '.join(result.notes) or 'the run own account'}), "
            f"peak RSS {result.peak_rss_gb:.2f} GB (largest process; trainer {result.trainer_rss_gb:.2f} GB). "
            f"Run directory: `{result.run}`."
        ),
        "",
        *bars(result),
        "",
    ]
    return "\n".join(lines)


def write_docs(section: str) -> None:
    text = DOCS.read_text()
    start = text.find(HEADING + "\n")
    if start < 0:
        at = text.find(BEFORE)
        at = len(text) if at < 0 else at
        text = text[:at] + section.rstrip("\n") + "\n\n" + text[at:]
    else:
        ends = [
            i for i in (text.find("\n### ", start + 1), text.find("\n## ", start + 1)) if i >= 0
        ]
        end = min(ends) if ends else len(text)
        text = text[:start] + section.rstrip("\n") + "\n" + text[end:]
    DOCS.write_text(text)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--out", type=Path, default=Path("outputs/bench-wiki-search"))
    parser.add_argument("--report", type=Path, help="a finished run directory: no training")
    parser.add_argument("--write-docs", action="store_true", help=f"update {DOCS.name}")
    args = parser.parse_args()
    if args.report is not None:
        run = args.report.resolve()
        result = read_result(run, None, 0.0, float("nan"))
        result.notes.append("the run's own `perf/cpu_s_total`")
        if (run / MEASURED).is_file():  # the bench's own wait4 figures for this run
            measured = json.loads((run / MEASURED).read_text())
            result.cpu_s, result.wall_s = measured["cpu_s"], measured["wall_s"]
            result.peak_rss_gb = max(result.peak_rss_gb, measured["peak_rss_gb"])
            result.load, result.notes = measured["load"], measured["notes"]
        command = f"python scripts/bench_wiki_search.py --report {args.report}"
    else:
        result = bench(args.out.resolve())
        command = "python scripts/bench_wiki_search.py" + (
            " --write-docs" if args.write_docs else ""
        )
    section = report(result, command)
    print(section)
    if args.write_docs:
        write_docs(section)


if __name__ == "__main__":
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    main()
