"""A child process of ours (a run's trainer, a vLLM server): started so it dies with us,
watched so that its death is reported with its log tail, stopped with all it spawned.

Two mechanisms, because either alone leaks: PR_SET_PDEATHSIG makes Linux SIGKILL the child
when the parent dies, even by SIGKILL (no handler of ours runs then); a process group of its
own lets `stop()` kill the child together with whatever it spawned (torchrun's workers, vLLM's
engine process), which PDEATHSIG alone would orphan. The starter is its children's orphans'
reaper (lifetime.adopt_orphans): `stop()` reaps the whole group, so every process of it is
gone, not a zombie of init's, and its CPU-seconds count in the starter's `wait4`.
"""

from __future__ import annotations

import os
import shlex
import signal
import subprocess
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from engines.lifetime import adopt_orphans, die_with_parent

TAIL_LINES = 30


class ChildDied(RuntimeError):
    """A supervised child exited while the run needed it; the message names it and shows its log."""

    def __init__(self, name: str, returncode: int | None, tail: str) -> None:
        how = f"exit status {returncode}" if returncode is None or returncode >= 0 else None
        if how is None and returncode is not None:
            try:
                how = f"killed by {signal.Signals(-returncode).name}"
            except ValueError:
                how = f"killed by signal {-returncode}"
        super().__init__(f"the {name} process died ({how}); last lines of its log:\n{tail}")
        self.name = name
        self.returncode = returncode


class StartFailed(RuntimeError):
    """A child could not be started at all (its program is missing, not executable, …)."""

    def __init__(self, name: str, argv: Sequence[str], exc: OSError) -> None:
        super().__init__(
            f"could not start the {name} process ({argv[0]}): {exc.strerror or exc}; "
            f"the command was: {shlex.join(argv)}"
        )
        self.name = name


def log_tail(path: Path, lines: int = TAIL_LINES) -> str:
    if not path.is_file():
        return "(no log)"
    with path.open("rb") as fh:
        fh.seek(0, os.SEEK_END)
        size = fh.tell()
        fh.seek(max(0, size - 16384))
        text = fh.read().decode(errors="replace")
    return "\n".join(text.splitlines()[-lines:]) or "(empty log)"


@dataclass
class Child:
    """One supervised process and its log file."""

    name: str
    argv: list[str]
    log: Path
    env: dict[str, str] | None = None
    cwd: Path | None = None
    proc: subprocess.Popen[bytes] | None = field(default=None, repr=False)

    def start(self) -> None:
        """Call from the main thread: PDEATHSIG fires when the *thread* that forked exits, so a
        child started from a worker thread would be killed when that thread ends."""
        self.log.parent.mkdir(parents=True, exist_ok=True)
        adopt_orphans()
        with self.log.open("ab") as out:
            try:
                self.proc = self._popen(out)
            except OSError as exc:
                raise StartFailed(self.name, self.argv, exc) from exc

    def _popen(self, out: Any) -> subprocess.Popen[bytes]:
        return subprocess.Popen(
            self.argv,
            stdout=out,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            env=self.env,
            cwd=self.cwd,
            start_new_session=True,  # its own process group, killed as a whole in stop()
            # PDEATHSIG can only be set by the child itself; prctl is async-signal-safe.
            preexec_fn=die_with_parent,  # noqa: PLW1509
        )

    @property
    def pid(self) -> int | None:
        return self.proc.pid if self.proc is not None else None

    def poll(self) -> int | None:
        return self.proc.poll() if self.proc is not None else None

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def check(self) -> None:
        """Raise ChildDied if the child has exited (a clean exit too: the run still needed it)."""
        code = self.poll()
        if self.proc is not None and code is not None:
            raise ChildDied(self.name, code, log_tail(self.log))

    def stop(self, grace_s: float = 10.0) -> None:
        """SIGTERM the child's process group, SIGKILL it after `grace_s`, reap all of it."""
        if self.proc is None:
            return
        pgid = self.proc.pid
        if self.proc.poll() is None:
            _signal_group(pgid, signal.SIGTERM)
            try:
                self.proc.wait(timeout=grace_s)
            except subprocess.TimeoutExpired:
                pass
        _signal_group(pgid, signal.SIGKILL)  # stragglers it spawned, even after a clean exit
        try:
            self.proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            return
        reap_group(pgid, timeout_s=5)


def _signal_group(pgid: int, sig: signal.Signals) -> None:
    try:
        os.killpg(pgid, sig)
    except (ProcessLookupError, PermissionError):
        pass


def reap_group(pgid: int, timeout_s: float) -> int:
    """Reap this process's children in process group `pgid` (the orphans of a stopped child,
    adopted: lifetime.adopt_orphans) until none is left or `timeout_s` passes; how many.

    Call after the group's leader was waited for: a process's children are reparented before
    it becomes a zombie, so each one reaped hands over its own before this looks again."""
    reaped = 0
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            pid, _ = os.waitpid(-pgid, os.WNOHANG)
        except ChildProcessError:
            return reaped  # none of ours is left in the group
        if pid:
            reaped += 1
        elif time.monotonic() > deadline:
            return reaped
        else:
            time.sleep(0.02)  # one of them is still dying
