"""Run an agent program inside a sandbox whose only way out is the interception server's socket.

    python3 -I relay.py PROGRAM [ARGS...]

The sandbox has no network, only loopback, and the server's Unix socket mounted read-only at
`$PRIME_INTERCEPT_SOCKET`. This relay listens on 127.0.0.1 (a port of its own), forwards each
connection to that socket, and runs the program with `OPENAI_BASE_URL` and
`ANTHROPIC_BASE_URL` pointing at it, so an SDK that knows only TCP base URLs works unchanged.
Standard library only: it runs under the sandbox's own Python. Its exit status is the
program's.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import threading


def _pump(source: socket.socket, sink: socket.socket) -> None:
    try:
        while data := source.recv(65536):
            sink.sendall(data)
    except OSError:
        pass
    finally:
        for end in (sink, source):
            try:
                end.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass


def _serve(listener: socket.socket, path: str) -> None:
    while True:
        client, _ = listener.accept()
        upstream = socket.socket(socket.AF_UNIX)
        try:
            upstream.connect(path)
        except OSError:
            client.close()
            continue
        for pair in ((client, upstream), (upstream, client)):
            threading.Thread(target=_pump, args=pair, daemon=True).start()


def main() -> int:
    path = os.environ.pop("PRIME_INTERCEPT_SOCKET")
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(128)
    root = f"http://127.0.0.1:{listener.getsockname()[1]}"
    threading.Thread(target=_serve, args=(listener, path), daemon=True).start()
    env = dict(os.environ, OPENAI_BASE_URL=root + "/v1", ANTHROPIC_BASE_URL=root)
    try:
        return subprocess.call(sys.argv[1:], env=env)
    except OSError as exc:
        print(f"relay: cannot start {sys.argv[1:2]}: {exc}", file=sys.stderr)
        return 127


if __name__ == "__main__":
    sys.exit(main())
