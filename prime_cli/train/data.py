"""`prime train --data X`: the traces `--algo sft` trains on, as one JSONL file the run reads.

X is a JSONL file (what `prime eval export --format sft` writes, or a run's `results.jsonl`),
used in place; or eval runs, as `prime eval export` reads them: a run directory, a run id
under `--runs-dir`, or an evaluation on the hub (runs on the hub are the dataset store). Runs
are read once, their error records and repeated transcripts left out, and written to
`<output_dir>/data/sft-<sha256>.jsonl` (atomically, named by content), so the run's
config names a file that a resume reads again unchanged.
"""

from __future__ import annotations

import hashlib
from pathlib import Path

from prime_cli.errors import CliError
from prime_cli.eval.export import read_runs
from prime_env.sft import select_records
from registry_index.files import write_atomic

DATA_DIR = "data"


def resolve_data(target: str, output_dir: Path, runs_dir: Path = Path("outputs")) -> Path:
    """The JSONL file `--data target` means (written under `output_dir/data` for runs)."""
    path = Path(target).expanduser()
    if path.is_file():
        return path.resolve()
    records = read_runs((target,), runs_dir)
    selection = select_records(records)
    if not selection.kept:
        raise CliError(
            f"--data {target}: none of its {selection.read} rollouts can be trained on "
            f"({selection.errors} errors); nothing to learn from"
        )
    text = "".join(record.to_json() + "\n" for record in selection.kept)
    digest = hashlib.sha256(text.encode()).hexdigest()[:16]
    out = (output_dir / DATA_DIR / f"sft-{digest}.jsonl").resolve()
    if not out.is_file():
        write_atomic(out, text)
    return out
