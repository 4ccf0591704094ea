"""Where the hub client tells what it is doing: callbacks, never a terminal of its own.

The library prints nothing: a caller that shows progress (the `prime` CLI draws rich bars and
yellow retry lines on stderr) passes its callbacks; the defaults go to the `hub_client` logger
and draw no progress.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager
from dataclasses import dataclass
from typing import Protocol

_logger = logging.getLogger("hub_client")


class TransferProgress(Protocol):
    """One transfer's progress: `reset` when an attempt starts (a retry starts again from the
    first byte), `advance` as bytes move."""

    def reset(self, total: int | None) -> None: ...

    def advance(self, size: int) -> None: ...


ProgressFactory = Callable[[str, int | None], AbstractContextManager[TransferProgress]]
"""`(label, total bytes or None)` -> the progress of one transfer, for as long as it runs."""


class _Silent:
    def reset(self, total: int | None) -> None:
        pass

    def advance(self, size: int) -> None:
        pass


@contextmanager
def no_progress(_label: str, _total: int | None) -> Iterator[TransferProgress]:
    """A transfer that draws nothing."""
    yield _Silent()


def _discard(_line: str) -> None:
    pass


@dataclass(frozen=True)
class Feedback:
    """The callbacks of one caller: a step worth telling (`note`), a retry or a recovered
    failure (`warn`), transfers (`progress`), and an installer's own output line by line."""

    note: Callable[[str], None] = _logger.info
    warn: Callable[[str], None] = _logger.warning
    progress: ProgressFactory = no_progress
    installer_output: Callable[[str], None] = _discard
