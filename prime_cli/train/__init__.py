"""`prime train …`: the commands (commands.py) over trainer_bridge."""

from prime_cli.train.commands import train

__all__ = ["train"]
