"""Runs INSIDE the sandbox (python3 -I test_runner.py < spec.json); never imported on the host.

The host sends only the left-hand side of each hidden test (`add(1, 2)` of
`assert add(1, 2) == 3`): the expected values never enter the sandbox, so candidate code
that forges this runner's output (writing to its pipes, exiting early, faking `__eq__`)
cannot make a test pass; the host compares the reported values itself.

Each expression is evaluated in its own forked child after the candidate's source, so one
test that hangs, crashes or calls sys.exit cannot take the others down; the child's own
stdout/stderr go to /dev/null. The child reports `repr(value)` (or the exception) through a
private pipe; the parent prints one line: the marker from the spec, then JSON results.
"""

import json
import os
import select
import signal
import sys
import time

MAX_REPORT = 1 << 20  # bytes of repr a test may report; more is the candidate's failure


def run_one(source, expression, timeout):
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
            value = eval(compile(expression, "<test>", "eval"), namespace)
            report = {"repr": repr(value)}
        except BaseException as exc:  # noqa: BLE001 - the candidate's failure, reported as data
            report = {"error": f"{type(exc).__name__}: {exc}"[:300]}
        try:
            os.write(write_end, json.dumps(report).encode("utf-8", "replace")[:MAX_REPORT])
        finally:
            os._exit(0)
    os.close(write_end)
    chunks = []
    size = 0
    deadline = time.monotonic() + timeout
    timed_out = False
    while size <= MAX_REPORT:
        left = deadline - time.monotonic()
        if left <= 0:
            timed_out = True
            break
        ready, _, _ = select.select([read_end], [], [], left)
        if not ready:
            continue
        data = os.read(read_end, 65536)
        if not data:
            break
        chunks.append(data)
        size += len(data)
    os.kill(pid, signal.SIGKILL)  # no-op if it already exited; its children die with the command
    _, wait_status = os.waitpid(pid, 0)
    os.close(read_end)
    if timed_out:
        return {"error": f"timed out after {timeout:g}s"}
    try:
        report = json.loads(b"".join(chunks).decode("utf-8", "replace"))
    except ValueError:
        report = None
    if not isinstance(report, dict):
        if os.WIFSIGNALED(wait_status):
            return {"error": f"killed by signal {os.WTERMSIG(wait_status)}"}
        return {"error": "the test produced no result"}
    return report


def main():
    spec = json.load(sys.stdin)
    results = [run_one(spec["source"], expr, spec["timeout"]) for expr in spec["expressions"]]
    sys.stdout.write(spec["marker"] + json.dumps(results) + "\n")
    sys.stdout.flush()


if __name__ == "__main__":
    main()
