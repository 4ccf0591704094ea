"""Runs INSIDE the sandbox (python3 -I test_runner.py < spec.json); never imported on the host.

Each hidden test runs in its own forked child, so one test that hangs, crashes or calls
sys.exit cannot take the others down; the child's output goes to /dev/null so the candidate
cannot print a fake result. A test passes only if its child reports "pass" through a private
pipe before exiting. The parent prints one line: the marker from the spec, then JSON results.
"""

import json
import os
import select
import signal
import sys
import time


def run_one(source, test, timeout):
    read_end, write_end = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(read_end)
        devnull = os.open(os.devnull, os.O_RDWR)
        for fd in (0, 1, 2):
            os.dup2(devnull, fd)
        try:
            namespace = {"__name__": "solution"}
            # Running untrusted code is this file's purpose; it only ever runs inside a sandbox.
            exec(compile(source, "solution.py", "exec"), namespace)  # noqa: S102
            exec(compile(test, "<test>", "exec"), namespace)  # noqa: S102
            os.write(write_end, b"pass")
            os._exit(0)
        except BaseException as exc:  # noqa: BLE001 - the candidate's failure, reported as data
            os.write(write_end, f"{type(exc).__name__}: {exc}"[:300].encode("utf-8", "replace"))
            os._exit(1)
    os.close(write_end)
    chunks = []
    deadline = time.monotonic() + timeout
    status = None
    while True:
        left = deadline - time.monotonic()
        if left <= 0:
            status = "timeout"
            break
        ready, _, _ = select.select([read_end], [], [], left)
        if not ready:
            continue
        data = os.read(read_end, 4096)
        if not data:
            break
        chunks.append(data)
    if status == "timeout":
        os.kill(pid, signal.SIGKILL)
    _, wait_status = os.waitpid(pid, 0)
    os.close(read_end)
    message = b"".join(chunks).decode("utf-8", "replace")
    if status == "timeout":
        return {"passed": False, "error": f"timed out after {timeout:g}s"}
    if os.WIFSIGNALED(wait_status):
        return {"passed": False, "error": f"killed by signal {os.WTERMSIG(wait_status)}"}
    if message == "pass" and os.WEXITSTATUS(wait_status) == 0:
        return {"passed": True, "error": None}
    return {
        "passed": False,
        "error": message or f"exited with status {os.WEXITSTATUS(wait_status)}",
    }


def main():
    spec = json.load(sys.stdin)
    results = [run_one(spec["source"], test, spec["timeout"]) for test in spec["tests"]]
    sys.stdout.write(spec["marker"] + json.dumps(results) + "\n")
    sys.stdout.flush()


if __name__ == "__main__":
    main()
