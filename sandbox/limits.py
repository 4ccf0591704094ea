"""Resource limits and defaults shared by every backend."""

from __future__ import annotations

import os
from dataclasses import dataclass

DEFAULT_IMAGE = os.environ.get("PRIME_SANDBOX_IMAGE", "prime-sandbox/python:bookworm")


@dataclass(frozen=True)
class SandboxLimits:
    """How much a sandbox may use. The defaults fit many concurrent sandboxes on a laptop.

    Docker enforces memory, CPU and pids with cgroups for the whole container; the local
    backend can only set per-process rlimits (address space per process, processes per uid),
    which is one reason it is documented as weaker.
    """

    memory_mb: int = 512
    cpus: float = 1.0
    pids: int = 128
    # Per process: CPU seconds, open files, largest file it may write.
    cpu_seconds: int = 600
    nofile: int = 256
    file_size_mb: int = 64
    # The work directory and /tmp are tmpfs (counted against memory), /dev/shm a smaller one.
    workdir_mb: int = 256
    shm_mb: int = 64
    # stdout and stderr are each kept up to this many bytes, the rest is dropped and flagged.
    output_bytes: int = 1 << 20
    # Largest file read_file returns or write_file/upload_dir send in one request.
    transfer_bytes: int = 64 << 20
    # A command's timeout when the caller gives none, and the sandbox's lifetime backstop.
    timeout_s: float = 30.0
    ttl_s: float = 6 * 3600.0

    def child_rlimits(self, address_space: bool = False, processes: bool = False) -> str:
        """The supervisor's command-line form of the per-command rlimits (supervisor._parse_limits).

        `address_space`: RLIMIT_AS = the memory limit per process, where nothing else limits
        memory (also kept under a cgroup, as a cheap first bound). `processes`: RLIMIT_NPROC =
        the pids limit, for a uid of the sandbox's own (it counts every process of that uid).
        """
        limits = f"cpu={self.cpu_seconds},nofile={self.nofile},fsize={self.file_size_mb << 20}"
        if address_space:
            limits += f",as={self.memory_mb << 20}"
        if processes:
            limits += f",nproc={self.pids}"
        return limits
