"""tinker-cookbook's supervised recipe, unchanged, against a hub's Lab, offline (docs/lab.md).

    TINKER_API_KEY=tml-phub_… python scripts/lab_cookbook_sl.py --lab http://127.0.0.1:8000/lab \\
        [--data FILE.jsonl] [--log-dir DIR] [--batch-size 16] [--epochs 1]

It runs `tinker_cookbook.supervised.train.main` (0.6) as sl_basic.py configures it, with the
dataset builder its comment names for your own data (`FromConversationFileBuilder`: a JSONL of
`{"messages": [...]}`; default: the cookbook's own example_data/conversations.jsonl) and the
Lab's base model `local/smollm2-135m`. The cookbook loads tokenizers by model name from the
Hugging Face hub; here none is reachable, so the model's converted directory (local_model's)
is placed in a Hugging Face cache under the log directory as `local/smollm2-135m` and the hub
is switched off (HF_HUB_OFFLINE=1). It prints the recipe's own train NLL, first and last step.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import shutil
from pathlib import Path

MODEL = "local/smollm2-135m"
REVISION = "0" * 40  # the cache's one snapshot of the local model's files
RENDERER = "role_colon"  # the cookbook's generic renderer (SmolLM2 has none of its own)


def offline_hf_cache(root: Path) -> Path:
    """HF_HOME holding `local/smollm2-135m` (its tokenizer files) as a hub snapshot."""
    from local_model.models import tokenizer_dir

    repo = root / "hub" / f"models--{MODEL.replace('/', '--')}"
    snapshot = repo / "snapshots" / REVISION
    snapshot.mkdir(parents=True, exist_ok=True)
    for source in tokenizer_dir(MODEL.split("/", 1)[1]).iterdir():
        if source.is_file() and not source.name.endswith(".safetensors"):
            shutil.copy(source, snapshot / source.name)
    (repo / "refs").mkdir(exist_ok=True)
    (repo / "refs" / "main").write_text(REVISION)
    return root


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--lab", required=True, help="the Lab's URL, HUB/lab")
    parser.add_argument("--data", type=Path, help="a JSONL of {'messages': [...]}")
    parser.add_argument("--log-dir", type=Path, default=Path("outputs/lab-cookbook-sl"))
    parser.add_argument("--batch-size", type=int, default=16)
    parser.add_argument("--epochs", type=int, default=1)
    args = parser.parse_args()
    if not os.environ.get("TINKER_API_KEY"):
        parser.error("set TINKER_API_KEY=tml-<a train-scoped hub token>")
    os.environ["HF_HOME"] = str(offline_hf_cache(args.log_dir.resolve() / "hf"))
    os.environ["HF_HUB_OFFLINE"] = "1"

    import tinker_cookbook
    from tinker_cookbook.renderers import TrainOnWhat
    from tinker_cookbook.supervised import train
    from tinker_cookbook.supervised.data import FromConversationFileBuilder
    from tinker_cookbook.supervised.types import ChatDatasetBuilderCommonConfig

    data = args.data or Path(tinker_cookbook.__file__).parent / "example_data/conversations.jsonl"
    common = ChatDatasetBuilderCommonConfig(
        model_name_for_tokenizer=MODEL,
        renderer_name=RENDERER,
        max_length=512,
        batch_size=args.batch_size,
        train_on_what=TrainOnWhat.ALL_ASSISTANT_MESSAGES,
    )
    log_path = args.log_dir.resolve() / "run"
    config = train.Config(
        log_path=str(log_path),
        model_name=MODEL,
        recipe_name="recipe_sl_basic",
        renderer_name=RENDERER,
        dataset_builder=FromConversationFileBuilder(
            common_config=common, file_path=str(data), test_size=16
        ),
        learning_rate=2e-4,
        lr_schedule="linear",
        num_epochs=args.epochs,
        lora_rank=8,
        base_url=args.lab,
        eval_every=4,
        save_every=0,
    )
    asyncio.run(train.main(config))
    rows = [json.loads(line) for line in (log_path / "metrics.jsonl").read_text().splitlines()]
    nll = [(r["step"], r["train_mean_nll"]) for r in rows if "train_mean_nll" in r]
    print(f"{len(nll)} steps; train_mean_nll: step {nll[0][0]}: {nll[0][1]:.3f} -> "
          f"step {nll[-1][0]}: {nll[-1][1]:.3f}")  # fmt: skip


if __name__ == "__main__":
    main()
