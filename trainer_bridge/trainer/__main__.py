"""`python -m trainer_bridge.trainer --run-dir DIR` (or under torchrun): the trainer process."""

from __future__ import annotations

import argparse
import ctypes
import os
import sys
from pathlib import Path

import torch

from engines.lifetime import die_with_parent
from trainer_bridge.config import ConfigError
from trainer_bridge.trainer.distributed import Dist, init_process_group
from trainer_bridge.trainer.trainer import Trainer, load_run_config


def return_freed_memory() -> None:
    """Make glibc hand large freed blocks back to the OS at once. Autograd frees and reallocates
    tensors of many sizes every micro-batch; glibc's adaptive mmap threshold then serves them
    from a heap it never shrinks (docs/benchmarks.md: the trainer's peak RSS with and without)."""
    if not sys.platform.startswith("linux"):
        return
    try:
        libc = ctypes.CDLL("libc.so.6")
    except OSError:
        return  # not glibc (musl, …): nothing to tune
    m_trim_threshold, m_mmap_threshold = -1, -3
    libc.mallopt(m_mmap_threshold, 64 * 1024)
    libc.mallopt(m_trim_threshold, 0)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m trainer_bridge.trainer")
    parser.add_argument("--run-dir", type=Path, required=True)
    parser.add_argument("--resume-step", type=int, default=None)
    args = parser.parse_args(argv)
    try:
        config = load_run_config(args.run_dir)
    except (OSError, ValueError) as exc:
        print(f"trainer: cannot read {args.run_dir}/config/resolved.toml: {exc}", file=sys.stderr)
        return 2
    return_freed_memory()
    dist = Dist()
    if int(os.environ.get("WORLD_SIZE", "1")) > 1:
        die_with_parent()  # torchrun's workers run in sessions of their own (lifetime.py)
        dist = init_process_group()
    try:
        Trainer(args.run_dir, config, dist).run(args.resume_step)
    except ConfigError as exc:
        print(f"trainer: {exc}", file=sys.stderr)
        return 2
    finally:
        if dist.world_size > 1:
            torch.distributed.destroy_process_group()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
