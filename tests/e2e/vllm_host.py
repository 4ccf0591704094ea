"""Holds one vLLM server for a test module: `python -m tests.e2e.vllm_host MODEL RANK` starts
it as `prime eval run --backend vllm` does (engines.serving), prints one JSON line (url, log,
server pid), and keeps it until its stdin closes. SIGKILLed, it must take the server with it.
"""

from __future__ import annotations

import asyncio
import json
import sys

from engines.serving import _servers, ensure_server


async def main(model: str, rank: int) -> None:
    served = await ensure_server(
        model, lora_rank=rank, say=lambda line: print(line, file=sys.stderr, flush=True)
    )
    server = _servers[model]
    print(json.dumps({"url": served.url, "log": str(server.log), "pid": server.child.pid}))
    sys.stdout.flush()


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1], int(sys.argv[2])))
    sys.stdin.read()  # until the test module closes it; atexit then stops the server
