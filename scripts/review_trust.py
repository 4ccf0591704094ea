#!/usr/bin/env python
"""Held-out hostile review of issue 37's classes: fresh cases, not the ones the fixes were
tested against, on a real hub (`prime hub serve` on loopback) over SQLite or PostgreSQL.

Classes: fair verification (one account's slow rubrics vs two others' runs), the install's
disk budget and cache (many small files, not one big one), out.json (a symlink to /dev/zero,
deep nesting, more entries than samples), the memory a run's samples take (one scored
sample among 60,000 errored ones; 12,000 tiny scored ones), batches per run, dependency
confusion and hub-only dependencies (a name spelled another way), recipe keys (other keys
than those fixed), run names, route words as owner names, lone surrogates in other fields,
`TaskSet.from_hf` inputs. Each case prints PASS or FAIL with what it saw; the hub's RSS is
sampled every 50 ms and reported per verification attack (peak over idle).

    .venv/bin/python scripts/review_trust.py                       # SQLite, bubblewrap
    .venv/bin/python scripts/review_trust.py --database postgres   # a throwaway cluster
    .venv/bin/python scripts/review_trust.py --only recipes,names  # some classes

Exit status 1 when any case fails. Needs bubblewrap (or Docker: --sandbox docker) for the
verification classes; uv offline is fine (its cache must hold the SDK's dependencies).
"""

from __future__ import annotations

import argparse
import base64
import json
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Self

import httpx

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from rich.console import Console

from hub_client.client import HubClient
from hub_server.admin import create_token, create_user, open_database
from hub_server.core.settings import HubSettings
from prime_cli.env.project import load_project
from prime_cli.env.publish import push_environment
from prime_cli.env.scaffold import create_scaffold
from testing.benchmarks import serve_hub, stop_process

PRIME = str(Path(sys.executable).with_name("prime"))
EVALS = "/api/v1/evaluations"
MIB = 1 << 20
TIMEOUT = 10  # seconds a verification may take here (the slow rubrics' bound)


@dataclass
class Result:
    klass: str
    case: str
    ok: bool
    saw: str


@dataclass
class Hub:
    url: str
    data_dir: Path
    work: Path
    process: subprocess.Popen[bytes]
    tokens: dict[str, str] = field(default_factory=dict)
    database_url: str | None = None
    runs: list[str] = field(default_factory=list)
    """Every run pushed so far: a class waits until the earlier ones are verified, so its
    scratch directories and RSS are its own."""

    def http(self, user: str = "admin") -> httpx.Client:
        return httpx.Client(base_url=self.url, headers={"Authorization": f"Bearer {self.tokens[user]}"},
                            timeout=120)  # fmt: skip

    def rss(self) -> int:
        for line in Path(f"/proc/{self.process.pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
        return 0


class Peak:
    """The hub's peak RSS while a block runs, sampled every 50 ms."""

    def __init__(self, hub: Hub) -> None:
        self.hub, self.idle, self.peak = hub, hub.rss(), 0
        self._stop = threading.Event()

    def __enter__(self) -> Self:
        def sample() -> None:
            while not self._stop.is_set():
                self.peak = max(self.peak, self.hub.rss())
                time.sleep(0.05)

        threading.Thread(target=sample, daemon=True).start()
        return self

    def __exit__(self, *_: object) -> None:
        self._stop.set()

    def __str__(self) -> str:
        return f"RSS idle {self.idle / MIB:.0f} MiB, peak {self.peak / MIB:.0f} MiB (+{(self.peak - self.idle) / MIB:.0f})"


# -- the hub ---------------------------------------------------------------------------------


@contextmanager
def served_hub(database: str, sandbox: str) -> Iterator[Hub]:
    work = Path(tempfile.mkdtemp(prefix="review-trust-"))
    data_dir, tmp = work / "hub", work / "tmp"
    tmp.mkdir()
    with _database(database) as url:
        env = {
            "PRIME_HUB_VERIFY_SANDBOX": sandbox, "PRIME_HUB_VERIFY_TIMEOUT_SECONDS": str(TIMEOUT),
            "PRIME_HUB_VERIFY_POLL_SECONDS": "0.2", "PRIME_HUB_VERIFY_DISK_BYTES": str(64 * MIB),
            "PRIME_HUB_VERIFY_MAX_SAMPLES": "10000", "TMPDIR": str(tmp), "UV_OFFLINE": "1",
            **({"PRIME_HUB_DATABASE_URL": url} if url else {}),
        }  # fmt: skip
        settings = HubSettings(data_dir=data_dir, database_url=url)
        engine = open_database(settings)
        tokens = {}
        for user in ("admin", "mallory", "alice", "bob"):
            create_user(engine, user, admin=user == "admin")
            tokens[user] = create_token(engine, user, "review", ["all"])[0]
        engine.dispose()
        # A hub that does not come up leaves `work` behind: its server.log says why.
        process, hub_url = serve_hub(data_dir, {**os.environ, **env}, work / "server.log", 120)
        hub = Hub(hub_url, data_dir, work, process, tokens, url)
        try:
            yield hub
        finally:
            stop_process(process, 30)
            shutil.rmtree(work, ignore_errors=True)


@contextmanager
def _database(kind: str) -> Iterator[str | None]:
    if kind == "sqlite":
        yield None
        return
    from tests.hub_server.services import postgres_cluster

    with postgres_cluster() as url:
        yield url


# -- environments and runs ----------------------------------------------------------------


def push(hub: Hub, user: str, name: str, edit: Callable[[Path], None] | None = None) -> Path:
    """`prime env init NAME`, changed by `edit`, pushed by `user`; its project directory."""
    (hub.work / "projects" / user).mkdir(parents=True, exist_ok=True)
    directory = create_scaffold(name, hub.work / "projects" / user)
    if edit is not None:
        edit(directory)
    with HubClient(hub.url, hub.tokens[user]) as client:
        push_environment(client, load_project(directory), user, visibility=None,
                         console=Console(stderr=True, quiet=True))  # fmt: skip
    return directory


def run_of(hub: Hub, user: str, owner: str, directory: Path, samples: list[dict[str, Any]],
           batch: int = 50_000, finalize: bool = True) -> str:  # fmt: skip
    """A run of `owner/<directory's env>` pushed by `user` with `samples`, finalized."""
    name = directory.name
    with hub.http(user) as api:
        run = api.post(f"{EVALS}/", json={"name": name, "model_name": f"m-{user}", "is_public": True,
                                         "environments": [{"slug": f"{owner}/{name}"}]}).json()["data"]["id"]  # fmt: skip
        for start in range(0, len(samples), batch):
            answer = api.post(
                f"{EVALS}/{run}/samples", json={"samples": samples[start : start + batch]}
            )
            assert answer.status_code == 200, answer.text
        if finalize:
            finish(hub, user, str(run))
    hub.runs.append(str(run))
    return str(run)


def finish(hub: Hub, user: str, run: str) -> None:
    with hub.http(user) as api:
        done = api.post(f"{EVALS}/{run}/finalize", json={})
        assert done.status_code == 200, done.text


def honest_samples(directory: Path, n: int = 2) -> list[dict[str, Any]]:
    """The environment's first tasks as its runner records them, answered right."""
    code = (
        "import json, sys; from prime_env.loading import load; env = load(sys.argv[1]); "
        "tasks = env.get_eval_tasks(); print(json.dumps([{'example_index': i, 'rollout_index': 0, "
        "'task_id': t.id, 'prompt': env.harness.build_prompt(t), 'answer': t.answer, 'info': t.info, "
        "'completion': [{'role': 'assistant', 'content': 'It is ' + t.answer}]} "
        f"for i, t in enumerate(tasks[:{n}])]))"
    )
    out = subprocess.run([sys.executable, "-c", code, str(directory)], capture_output=True, text=True,
                         check=True).stdout  # fmt: skip
    records = json.loads(out)
    for record in records:
        text = record["completion"][0]["content"]
        record.update(reward=1.0, rewards={"correct_answer": 1.0},
                      metrics={"answer_length": float(len(text))})  # fmt: skip
    return records


def state(hub: Hub, run: str) -> dict[str, Any]:
    with hub.http() as api:
        return dict(api.get(f"{EVALS}/{run}").json()["data"])


def settle(hub: Hub, runs: list[str], bound: float = 600) -> dict[str, dict[str, Any]]:
    deadline = time.monotonic() + bound
    while True:
        states = {run: state(hub, run) for run in runs}
        if all(s["verification"] not in ("pending", "running") for s in states.values()):
            return states
        if time.monotonic() > deadline:
            return states
        time.sleep(0.3)


def edit_module(text: str) -> Callable[[Path], None]:
    def apply(directory: Path) -> None:
        module = directory / f"{directory.name.replace('-', '_')}.py"
        module.write_text(module.read_text() + text)

    return apply


_SLOW = "\nimport time as _t\n_correct = correct_answer\n\n\ndef correct_answer(completion, answer):\n    _t.sleep(3600)\n    return _correct(completion, answer)\n"


# -- the classes ---------------------------------------------------------------------------


def fairness(hub: Hub) -> list[Result]:
    """mallory queues 8 slow runs on two environments; alice's and bob's runs, pushed after,
    must each start before mallory's second run does."""
    slow_a = push(hub, "mallory", "sleepy-a", edit_module(_SLOW))
    slow_b = push(hub, "mallory", "sleepy-b", edit_module(_SLOW))
    good = push(hub, "admin", "fairplay")
    record = honest_samples(good, 1)
    slow = [
        run_of(hub, "mallory", "mallory", d, [{**honest_samples(d, 1)[0]}])
        for d in [slow_a, slow_b] * 4
    ]
    victims = [run_of(hub, user, "admin", good, record) for user in ("alice", "bob")]
    states = settle(hub, victims)
    started = {run: state(hub, run) for run in slow[:3]}
    mallory_started = [r for r, s in started.items() if s["verification"] != "pending"]
    ok = all(s["verification"] == "verified" for s in states.values()) and len(mallory_started) <= 2
    saw = (f"victims {[s['verification'] for s in states.values()]}; mallory runs started by then: "
           f"{len(mallory_started)} of the first 3")  # fmt: skip
    return [Result("fair verification", "2 victims behind 8 slow runs on 2 envs", ok, saw)]


def disk_budget(hub: Hub) -> list[Result]:
    """A wheel of 2,000 small files (96 MiB installed, 64 MiB budget)."""

    def many_files(directory: Path) -> None:
        package = directory / "manyfiles_data"
        package.mkdir()
        block = base64.b64encode(os.urandom(2 << 10)).decode()
        for i in range(2000):
            (package / f"f{i}.txt").write_text(block + "a" * (48 << 10))
        (package / "__init__.py").write_text("")
        pyproject = directory / "pyproject.toml"
        pyproject.write_text(pyproject.read_text().replace(
            'py-modules = ["manyfiles"]',
            'py-modules = ["manyfiles"]\npackages = ["manyfiles_data"]\n'
            '[tool.setuptools.package-data]\nmanyfiles_data = ["*.txt"]'))  # fmt: skip

    directory = push(hub, "mallory", "manyfiles", many_files)
    before = _uv_cache_size()
    with Peak(hub) as peak:
        run = run_of(hub, "mallory", "mallory", directory, honest_samples(directory, 1))
        final = settle(hub, [run])[run]
    left = list((hub.work / "tmp").glob("hub-verify-*"))
    after = _uv_cache_size()
    kept = after.named - before.named  # the operator's cache is shared: only its files count
    ok = final["verification"] == "failed" and "MiB of disk" in (final["verification_detail"] or "") \
        and not left and kept < 1 * MIB  # fmt: skip
    return [Result("install disk budget", "2,000 small files, 96 MiB installed", ok,
                   f"{final['verification']}: {final['verification_detail']}; scratch left {len(left)}; "
                   f"operator uv cache: +{kept / MIB:.1f} MiB of manyfiles "
                   f"(+{(after.total - before.total) / MIB:.1f} MiB in all, by anyone); {peak}")]  # fmt: skip


@dataclass(frozen=True)
class CacheSize:
    total: int
    named: int
    """Bytes under a directory whose path names the attack's project (`manyfiles`)."""


def _uv_cache_size() -> CacheSize:
    """The operator's uv cache: all of it (other users of this machine's uv write there too)
    and the part that names the attack's wheel (what a verification would have left)."""
    import uv

    where = subprocess.run(
        [uv.find_uv_bin(), "cache", "dir"], check=False, capture_output=True, text=True
    ).stdout.strip()
    total = named = 0
    for root, _dirs, files in os.walk(where):
        for name in files:
            try:
                size = os.lstat(os.path.join(root, name)).st_blocks * 512
            except OSError:
                continue
            total += size
            named += size if "manyfiles" in os.path.join(root, name) else 0
    return CacheSize(total, named)


def out_json(hub: Hub) -> list[Result]:
    results = []
    for name, tail, expect in (
        ("zeroes", ("\nimport atexit as _a, os as _o\n_a.register(lambda: _o.path.isdir('/work/rescore') and "
                   "(_o.remove('/work/rescore/out.json'), _o.symlink('/dev/zero', '/work/rescore/out.json')))\n"),
         "wrote no out.json of at most"),
        ("deepout", ("\nimport atexit as _a, os as _o\n_a.register(lambda: _o.path.isdir('/work/rescore') and "
                    "open('/work/rescore/out.json', 'w').write('[' * 30000 + ']' * 30000))\n"),
         "out.json that is not"),
        ("longout", ("\nimport atexit as _a, os as _o\n_a.register(lambda: _o.path.isdir('/work/rescore') and "
                    "open('/work/rescore/out.json', 'w').write('{\"weights\": {}, \"scores\": [' + "
                    "'{\"reward\": 1.0},' * 200 + '{}]}'))\n"),
         "another number of samples"),
    ):  # fmt: skip
        directory = push(hub, "mallory", name, edit_module(tail))
        with Peak(hub) as peak:
            run = run_of(hub, "mallory", "mallory", directory, honest_samples(directory, 1))
            final = settle(hub, [run])[run]
        detail = final["verification_detail"] or ""
        ok = final["verification"] in ("failed", "disagreed") and expect in detail
        results.append(
            Result("out.json", name, ok, f"{final['verification']}: {detail[:120]}; {peak}")
        )
    return results


def sample_memory(hub: Hub) -> list[Result]:
    directory = push(hub, "alice", "crowded")
    real = honest_samples(directory, 1)[0]
    results = []
    errored = [{"example_index": i, "rollout_index": 0, "error": {"type": "x", "message": "y" * 100}}
               for i in range(1, 60_001)]  # fmt: skip
    tiny = [{**real, "example_index": 0, "rollout_index": i} for i in range(12_000)]
    for case, samples, expect in (
        ("1 scored among 60,000 errored", [real, *errored], ("verified", "disagreed", "failed")),
        ("12,000 scored (limit 10,000)", tiny, ("failed",)),
    ):
        run = run_of(hub, "alice", "alice", directory, samples, batch=20_000, finalize=False)
        with Peak(hub) as peak:  # the verification's share, not the push's
            finish(hub, "alice", run)
            final = settle(hub, [run])[run]
        ok = final["verification"] in expect and peak.peak - peak.idle < 150 * MIB
        results.append(Result("sample memory", case, ok,
                              f"{final['verification']}: {(final['verification_detail'] or '')[:100]}; {peak}"))  # fmt: skip
    return results


def batches(hub: Hub) -> list[Result]:
    directory = hub.work / "projects" / "alice" / "crowded"
    with hub.http("alice") as api:
        run = api.post(f"{EVALS}/", json={"name": "b", "model_name": "b",
                                          "environments": [{"slug": "alice/crowded"}]}).json()["data"]["id"]  # fmt: skip
        codes = [api.post(f"{EVALS}/{run}/samples", json={"samples": [
            {"example_index": i, "rollout_index": 0, "reward": 0.0, "rewards": {"correct_answer": 0.0},
             "metrics": {"answer_length": 0.0}}]}).status_code for i in range(1001)]  # fmt: skip
    del directory
    ok = codes[:1000] == [200] * 1000 and codes[1000] == 413
    return [Result("batches per run", "1,001 one-sample batches", ok, f"last codes {codes[-3:]}")]


def dependencies(hub: Hub) -> list[Result]:
    """alice's `needy` needs `Helper_Lib>=1` (hub: alice/helper-lib 1.0) and bob's `confused`
    needs `Helper-Lib>=2` (bob's namespace has helper-lib 1.0 only: never another index)."""

    def needs(spec: str) -> Callable[[Path], None]:
        def apply(directory: Path) -> None:
            pyproject = directory / "pyproject.toml"
            pyproject.write_text(pyproject.read_text().replace(
                'dependencies = ["prime-envhub-sdk>=0.1"]',
                f'dependencies = ["prime-envhub-sdk>=0.1", "{spec}"]'))  # fmt: skip

        return apply

    def helper(directory: Path) -> None:
        pyproject = directory / "pyproject.toml"
        pyproject.write_text(pyproject.read_text().replace('version = "0.1.0"', 'version = "1.0"'))

    results = []
    for user, spec, expect, detail in (
        ("alice", "Helper_Lib>=1", "verified", ""),
        ("bob", "Helper-Lib>=2", "failed", "never looked up on another index"),
    ):
        push(hub, user, "helper-lib", helper)
        directory = push(hub, user, f"needy-{user}", needs(spec))
        run = run_of(hub, user, user, directory, honest_samples(directory, 1))
        final = settle(hub, [run])[run]
        ok = final["verification"] == expect and detail in (final["verification_detail"] or "")
        results.append(Result("install: names from the hub", f"{user}: {spec}", ok,
                              f"{final['verification']}: {(final['verification_detail'] or '')[:140]}"))  # fmt: skip
    return results


def recipes(hub: Hub | None) -> list[Result]:
    project = ROOT / "builtin_envs" / "reverse-text"
    cases = {
        "trainer.world_size": "[trainer]\nworld_size = 4",
        "orchestrator.algo.data": '[orchestrator.algo]\ntype = "sft"\ndata = "/etc/passwd"',
        "orchestrator.env.0.id": '[[orchestrator.env]]\nid = "someone/else"',
        "ckpt.interval": "[ckpt]\ninterval = 1",
        "monitors.tensorboard": "[monitors]\ntensorboard = true",
        "orchestrator.algo.teacher.api_key_var": '[orchestrator.algo]\ntype = "rft"\n[orchestrator.algo.teacher]\nmodel = "reference"\napi_key_var = "HOME"',
        "inference.max_loras": "[inference]\nmax_loras = 64",
        "stages.0.orchestrator.algo.teacher.base_url": '[[stages]]\nmax_steps = 1\norchestrator = { algo = { type = "rft", teacher = { model = "reference", base_url = "http://127.0.0.1:9" } } }',
    }  # fmt: skip
    results = []
    work = Path(tempfile.mkdtemp(prefix="review-recipes-"))
    try:
        for key, text in cases.items():
            copy = work / key.replace(".", "_") / "reverse-text"
            shutil.copytree(
                project, copy, ignore=shutil.ignore_patterns("__pycache__", "*.egg-info")
            )
            (copy / "reverse_text" / "train" / "smollm2-135m.toml").write_text(
                f"max_steps = 2\n{text}\n"
            )
            done = subprocess.run([PRIME, "train", str(copy), "--dry-run"], check=False, capture_output=True, text=True,
                                  cwd=work)  # fmt: skip
            out = done.stdout + done.stderr
            ok = done.returncode == 2 and key in out and "Traceback" not in out
            results.append(Result("recipe keys", key, ok, f"exit {done.returncode}: {out.strip().splitlines()[-1][:100] if out.strip() else ''}"))  # fmt: skip
        for name in ("a\\b", " x", "x/../y", "-rf", "é"):
            done = subprocess.run([PRIME, "train", "prime/reverse-text", "--no-env-recipe",
                                   f"--run-name={name}", "--dry-run"], check=False, capture_output=True, text=True,
                                  cwd=work)  # fmt: skip
            out = done.stdout + done.stderr
            ok = done.returncode == 2 and "not one path component" in out
            results.append(Result("run names", repr(name), ok, f"exit {done.returncode}"))
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return results


def names(hub: Hub) -> list[Result]:
    results = []
    for kind, name in (("org", "docs"), ("user", "redoc"), ("user", "healthz"), ("org", "static"),
                       ("user", "tokens"), ("org", "whoami")):  # fmt: skip
        database = {"PRIME_HUB_DATABASE_URL": hub.database_url} if hub.database_url else {}
        done = subprocess.run([PRIME, "hub", kind, "add", name, "--data-dir", str(hub.data_dir)],
                              check=False, capture_output=True, text=True, env={**os.environ, **database})  # fmt: skip
        ok = done.returncode != 0 and "reserved" in done.stderr and "Traceback" not in done.stderr
        results.append(Result("route words", f"{kind} add {name}", ok, done.stderr.strip()[:100]))
    return results


def surrogates(hub: Hub) -> list[Result]:
    lone = "\udfff"
    results = []
    with hub.http("alice") as api:
        run = api.post(f"{EVALS}/", json={"name": "s", "model_name": "s",
                                          "environments": [{"slug": "alice/crowded"}]}).json()["data"]["id"]  # fmt: skip
        cases = [
            ("eval tags", "POST", f"{EVALS}/", {"name": "t", "model_name": "m", "tags": [lone],
                                                 "environments": [{"slug": "alice/crowded"}]}, "tags"),
            ("finalize metric name", "POST", f"{EVALS}/{run}/finalize", {"metrics": {lone: 1}}, "metrics"),
            ("sample info value", "POST", f"{EVALS}/{run}/samples",
             {"samples": [{"example_index": 0, "rollout_index": 0, "reward": 0.0, "info": {"n": [lone]}}]},
             "samples[0].info.n[0]"),
            ("sample model name", "POST", f"{EVALS}/{run}/samples",
             {"samples": [{"example_index": 0, "rollout_index": 0, "reward": 0.0, "model": "a" + lone}]},
             "samples[0].model"),
            ("resolve name", "POST", "/api/v1/environmentshub/resolve", {"name": "x" + lone}, "name"),
            ("patch tags", "PATCH", "/api/v1/environmentshub/alice/crowded", {"tags": [lone]}, "tags"),
        ]  # fmt: skip
        for case, method, path, body, field_name in cases:
            answer = api.request(method, path, content=json.dumps(body).encode(),
                                 headers={"Content-Type": "application/json"})  # fmt: skip
            detail = (
                answer.json().get("detail", "")
                if answer.headers.get("content-type", "").startswith("application/json")
                else answer.text[:80]
            )
            ok = answer.status_code == 400 and field_name in detail and "surrogate" in detail
            results.append(
                Result("lone surrogates", case, ok, f"{answer.status_code}: {detail[:100]}")
            )
        page = httpx.get(f"{hub.url}/alice/crowded", timeout=60)
        results.append(
            Result(
                "lone surrogates", "the page after", page.status_code == 200, str(page.status_code)
            )
        )
    return results


def from_hf(_hub: Hub | None) -> list[Result]:
    code = (
        "import sys, tempfile, pathlib; from prime_env import TaskSet, DatasetError\n"
        "f = pathlib.Path(tempfile.mkdtemp()) / 'file.txt'; f.write_text('x')\n"
        "for name in ['text', 'parquet', './nowhere', 'a/b/c', str(f), 'imagefolder']:\n"
        "    try:\n        TaskSet.from_hf(name)\n        print(name, 'NO ERROR')\n"
        "    except DatasetError as e:\n        print(name, 'DatasetError')\n"
        "    except Exception as e:\n        print(name, type(e).__name__)\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], check=False, capture_output=True, text=True
    ).stdout
    results = []
    for line in out.strip().splitlines():
        name, _, kind = line.rpartition(" ")
        results.append(Result("from_hf", name[:40], kind == "DatasetError", kind))
    return results


CLASSES: dict[str, Callable[[Hub], list[Result]]] = {
    "fairness": fairness, "disk": disk_budget, "outjson": out_json, "samples": sample_memory,
    "batches": batches, "deps": dependencies, "recipes": recipes, "names": names,
    "surrogates": surrogates, "from_hf": from_hf,
}  # fmt: skip


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--database", choices=["sqlite", "postgres"], default="sqlite")
    parser.add_argument("--sandbox", choices=["local", "docker"], default="local")
    parser.add_argument("--only", default="", help="comma-separated classes: " + ",".join(CLASSES))
    args = parser.parse_args()
    chosen = [c for c in (args.only.split(",") if args.only else CLASSES) if c]
    if "surrogates" in chosen and "samples" not in chosen:
        chosen.insert(0, "samples")  # surrogates use its environment
    if "batches" in chosen and "samples" not in chosen:
        chosen.insert(0, "samples")
    results: list[Result] = []
    with served_hub(args.database, args.sandbox) as hub:
        for name in chosen:
            settle(hub, hub.runs)  # the runs of earlier classes are verified first
            started = time.monotonic()
            try:
                found = CLASSES[name](hub)
            except Exception as exc:  # noqa: BLE001 - a case that crashed is a failure, with why
                found = [Result(name, "(crashed)", False, f"{type(exc).__name__}: {exc}"[:200])]
            results += found
            for r in found:
                print(f"{'PASS' if r.ok else 'FAIL'}  {r.klass:28} {r.case:44} {r.saw}", flush=True)
            print(f"      ({name}: {time.monotonic() - started:.0f} s)", flush=True)
        log = (hub.work / "server.log").read_text(errors="replace")
        fivexx = log.count('" 500 ')
    failed = [r for r in results if not r.ok]
    print(f"\n{len(results)} cases on {args.database}, sandbox {args.sandbox}: {len(failed)} failed; "
          f"hub answers 500: {fivexx}")  # fmt: skip
    return 1 if failed or fivexx else 0


if __name__ == "__main__":
    sys.exit(main())
