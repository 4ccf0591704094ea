"""Programs the sandbox tests run inside a sandbox (as its programs' uid), and their helpers.

`WRITABLE` finds every place a program can write: directories and regular files on every
read-write mount but /proc and /sys, and it prints them with their mount as JSON. `PLANT` leaves
a marker in each of them and in every kernel-side store a program can fill without a file
(System V shared memory, message queues and semaphores, POSIX message queues, the user and
session keyrings); `FIND` reports whatever of that a later program can still see.
"""

from __future__ import annotations

import json
from typing import Any

_SCAN = r'''
import ctypes, json, os, stat

SKIP = {"proc", "sysfs", "devpts", "cgroup", "cgroup2", "devtmpfs", "securityfs", "bpf"}


def mounts():
    found = []
    with open("/proc/self/mountinfo") as handle:
        for line in handle:
            left, right = line.split(" - ", 1)
            fields = left.split()
            point, options = fields[4].replace("\\040", " "), fields[5].split(",")
            kind, _, super_options = right.split(" ", 2)
            if "rw" in options and kind not in SKIP:
                found.append({"point": point, "kind": kind, "options": super_options.strip()})
    return found


def mount_of(path, points):
    return max((p for p in points if path == p or path.startswith(p.rstrip("/") + "/")), key=len)


def writable():
    """Every directory and regular file this program may write, by the mount it lies on."""
    table = mounts()
    points = [m["point"] for m in table]
    places = []
    for entry in table:
        for top, dirs, files in os.walk(entry["point"]):
            dirs[:] = [d for d in dirs if mount_of(os.path.join(top, d), points) == entry["point"]]
            if os.access(top, os.W_OK):
                places.append({"path": top, "dir": True, **entry})
            for name in files:
                path = os.path.join(top, name)
                try:
                    regular = stat.S_ISREG(os.lstat(path).st_mode)
                except OSError:
                    continue
                if regular and os.access(path, os.W_OK):
                    places.append({"path": path, "dir": False, **entry})
    return places
'''

WRITABLE = _SCAN + "\nprint(json.dumps(writable()))\n"

_IPC = r"""
libc = ctypes.CDLL(None, use_errno=True)
libc.syscall.restype = ctypes.c_long
libc.shmat.restype = ctypes.c_void_p
KEYCTL = {"x86_64": 250, "aarch64": 219, "riscv64": 219}.get(os.uname().machine)
ADD_KEY = {"x86_64": 248, "aarch64": 217, "riscv64": 217}.get(os.uname().machine)
KEY = 0x5EC2E7
try:
    rt = ctypes.CDLL("librt.so.1", use_errno=True)
except OSError:
    rt = libc
"""

PLANT = (
    _SCAN
    + _IPC
    + r"""
done = []
for n, place in enumerate(writable()):
    path = place["path"]
    try:
        if place["dir"]:
            with open(os.path.join(path, f"leak-{n}"), "w") as handle:
                handle.write("LEAKED")
            # A directory its owner made unreadable: a reset must still empty it.
            locked = os.path.join(path, f"locked-{n}")
            os.makedirs(os.path.join(locked, "inner"))
            with open(os.path.join(locked, "inner", "leak"), "w") as handle:
                handle.write("LEAKED")
            os.chmod(locked, 0)
        else:
            with open(path, "a") as handle:
                handle.write("LEAKED")
        done.append(path)
    except OSError:
        pass
shm = libc.shmget(KEY, 4096, 0o1000 | 0o666)
if shm >= 0:
    ctypes.memmove(libc.shmat(shm, None, 0), b"LEAKED", 6)
    done.append("sysv-shm")
msg = libc.msgget(KEY, 0o1000 | 0o666)
buffer = ctypes.create_string_buffer(b"\x01\x00\x00\x00\x00\x00\x00\x00LEAKED")
if msg >= 0 and libc.msgsnd(msg, buffer, 6, 0) == 0:
    done.append("sysv-msg")
if libc.semget(KEY, 1, 0o1000 | 0o666) >= 0:
    done.append("sysv-sem")
queue = rt.mq_open(b"/leak", 0o100 | 0o2, 0o666, None)
if queue >= 0 and rt.mq_send(queue, b"LEAKED", 6, 0) == 0:
    done.append("posix-mq")
for ring, name in ((-4, "user-keyring"), (-3, "session-keyring"), (-5, "user-session-keyring")):
    if ADD_KEY and libc.syscall(ADD_KEY, b"user", b"leak", b"LEAKED", 6, ring) > 0:
        done.append(name)
print(json.dumps(done))
"""
)

FIND = (
    _SCAN
    + _IPC
    + r"""
seen = []
for place in writable():
    path = place["path"]
    if place["dir"]:
        for top, dirs, files in os.walk(path):
            seen += [os.path.join(top, name) for name in dirs + files]
    else:
        try:
            with open(path, "rb") as handle:
                if b"LEAKED" in handle.read():
                    seen.append(path)
        except OSError:
            pass
for kind in ("shm", "msg", "sem"):
    with open(f"/proc/sysvipc/{kind}") as handle:
        seen += [f"sysv-{kind}: {line.split()[:2]}" for line in list(handle)[1:]]
if rt.mq_open(b"/leak", 0, 0, None) >= 0:
    seen.append("posix-mq /leak")
for ring, name in ((-4, "user-keyring"), (-3, "session-keyring"), (-5, "user-session-keyring")):
    if KEYCTL and libc.syscall(KEYCTL, 10, ring, b"user", b"leak", 0) > 0:  # KEYCTL_SEARCH
        seen.append(name)
print(json.dumps(sorted(set(seen))))
"""
)


def parse(stdout: bytes) -> Any:
    """The JSON a probe printed (the last line: a hijacked interpreter may print before it)."""
    return json.loads(stdout.decode().strip().splitlines()[-1])
