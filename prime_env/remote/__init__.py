"""Environments out of process: served by a worker (`prime_env/worker.py`) in a virtualenv of
their own, driven over the worker protocol (wire.py) behind the ordinary environment contract."""

from .environment import RemoteEnvironment, RemoteHarness, RemoteRubric
from .isolated import IsolatedEnv, envs_home, find, installed, load_isolated
from .process import WorkerProcess

__all__ = [
    "IsolatedEnv",
    "RemoteEnvironment",
    "RemoteHarness",
    "RemoteRubric",
    "WorkerProcess",
    "envs_home",
    "find",
    "installed",
    "load_isolated",
]
