"""The Docker backend: one hardened container per sandbox, its supervisor reached over `attach`.

Hardening by default: no network, read-only root, tmpfs /work, /tmp and /dev/shm (a private
IPC namespace) and any `writable_dirs` asked for (filled with the image's files there), memory =
memory+swap limit, CPU quota, pids limit, no-new-privileges, rlimits. The supervisor is the container's
PID 1 and runs as root with only CAP_SETUID, CAP_SETGID and CAP_KILL; programs run as uid
65534 with no capabilities, so they can neither signal nor ptrace nor prlimit it, and it kills
every process a command started when the command ends.
Cleanup happens three ways, so a crashed host leaves nothing behind:
- `stop()` removes the container;
- the container is started with stdin_once + auto_remove: when the owner dies its attach
  socket closes, the supervisor reads EOF, exits, and the daemon removes the container;
- every container carries labels (owner pid + start time + host, run id, expiry), and a reaper
  at each start removes containers whose owner is gone or whose TTL passed.
"""

from __future__ import annotations

import functools
import io
import os
import tarfile
import time
import uuid
import zipfile
from collections.abc import Sequence
from typing import Any

from sandbox import supervisor
from sandbox.backends.base import HOME, Sandbox, SandboxRow
from sandbox.channel import Channel, DockerAttachChannel
from sandbox.errors import SandboxError, SandboxUnavailable
from sandbox.limits import DEFAULT_IMAGE, SandboxLimits
from sandbox.owner import Owner

LABEL = "prime.sandbox"
LABEL_OWNER = "prime.sandbox.owner"
LABEL_RUN = "prime.sandbox.run"
LABEL_EXPIRES = "prime.sandbox.expires"
SANDBOX_UID = "65534:65534"  # the programs' uid:gid (the supervisor is the container's root)
# Memory kept free for the supervisor: /work, /tmp and /dev/shm (tmpfs, counted in the container's
# memory) may not fill the limit together, or full disks would leave it no room to answer.
SUPERVISOR_RESERVE_MB = 48
# One id per host process: every container it starts carries it, so a run's sandboxes can be listed.
RUN_ID = os.environ.get("PRIME_RUN_ID") or uuid.uuid4().hex[:12]

_client: Any = None


def docker_client() -> Any:
    """A docker SDK client for DOCKER_HOST (or the local socket), checked to be reachable."""
    global _client
    if _client is not None:
        return _client
    try:
        import docker
    except ImportError as exc:
        raise SandboxUnavailable(
            "the docker SDK is missing: pip install 'prime-envhub[sandbox]'"
        ) from exc
    try:
        client = docker.from_env(timeout=120)
        client.ping()
    except Exception as exc:  # docker raises DockerException, requests errors, FileNotFoundError
        raise _unreachable(exc) from exc
    _client = client
    return client


def _unreachable(exc: BaseException) -> SandboxUnavailable:
    return SandboxUnavailable(
        f"cannot reach the Docker daemon ({exc}); start it (scripts/start_services.sh) "
        "or use the local backend (--backend local)"
    )


def docker_available() -> bool:
    try:
        docker_client()
    except SandboxUnavailable:
        return False
    return True


def _sandbox_containers(client: Any) -> list[dict[str, Any]]:
    """Summaries from one list call: inspecting each would race with auto-removal."""
    return list(client.api.containers(all=True, filters={"label": LABEL}))


def image_exists(image: str) -> bool:
    import docker.errors

    try:
        docker_client().images.get(image)
    except docker.errors.ImageNotFound:
        return False
    return True


@functools.lru_cache(maxsize=32)
def image_dir_archive(image: str, path: str) -> bytes | None:
    """What `image` holds under `path`, as a zip archive the supervisor unpacks (regular files
    with their modes, and directories; links and devices are left out), or None when the image
    has nothing there. Read once per image and path from a container that is created, never
    started, and removed (labelled as a sandbox, so the reaper removes it if we die first)."""
    import docker.errors

    api = docker_client().api
    created = api.create_container(
        image,
        command=["true"],
        network_disabled=True,
        labels={
            LABEL: "1",
            LABEL_OWNER: Owner.current().encode(),
            LABEL_RUN: RUN_ID,
            LABEL_EXPIRES: str(int(time.time() + 600)),
        },
    )
    try:
        try:
            stream, _stat = api.get_archive(created["Id"], path)
        except docker.errors.NotFound:
            return None
        tar_bytes = b"".join(stream)
    finally:
        api.remove_container(created["Id"], force=True)
    buffer = io.BytesIO()
    count = 0
    with tarfile.open(fileobj=io.BytesIO(tar_bytes)) as tar, zipfile.ZipFile(buffer, "w") as out:
        for member in tar.getmembers():
            name = member.name.partition("/")[2]  # below the directory itself
            if not name or not (member.isfile() or member.isdir()):
                continue
            info = zipfile.ZipInfo(name + ("/" if member.isdir() else ""))
            info.external_attr = (member.mode & 0o777) << 16
            extracted = tar.extractfile(member) if member.isfile() else None
            out.writestr(info, extracted.read() if extracted is not None else b"")
            count += 1
    return buffer.getvalue() if count else None


class DockerSandbox(Sandbox):
    """A sandbox in a hardened Docker container (see the module docstring)."""

    backend = "docker"
    workdir = "/work"

    def __init__(
        self,
        image: str | None = None,
        limits: SandboxLimits | None = None,
        env: dict[str, str] | None = None,
        binds: dict[str, str] | None = None,
        writable_dirs: Sequence[str] | None = None,
    ) -> None:
        super().__init__(limits, env, binds, writable_dirs)
        self.image = image or DEFAULT_IMAGE
        self.container: Any = None
        self._started_at = 0.0

    @classmethod
    def list_sandboxes(cls) -> list[SandboxRow]:
        rows = []
        for container in _sandbox_containers(docker_client()):
            labels = container.get("Labels") or {}
            try:
                owner = Owner.decode(labels.get(LABEL_OWNER, ""))
                orphaned = not owner.alive()
                pid = str(owner.pid)
            except ValueError:
                orphaned, pid = True, "?"
            rows.append(
                {
                    "backend": "docker",
                    "id": container["Id"][:12],
                    "owner_pid": pid,
                    "status": "orphaned" if orphaned else container.get("State", ""),
                    "run": labels.get(LABEL_RUN, ""),
                    "image": container.get("Image", ""),
                }
            )
        return rows

    @classmethod
    def cleanup(cls, sandbox_id: str) -> None:
        """Force-remove the container and return only once the daemon no longer lists it."""
        import docker.errors

        api = docker_client().api
        try:
            api.remove_container(sandbox_id, force=True)
            return
        except docker.errors.NotFound:
            return
        except docker.errors.APIError as exc:
            # auto_remove is already removing it: wait for that instead of racing it.
            if "already in progress" not in str(exc):
                raise SandboxError(
                    f"cannot remove sandbox container {sandbox_id[:12]}: {exc}"
                ) from exc
        try:
            api.wait(sandbox_id, condition="removed", timeout=30)
        except docker.errors.NotFound:
            pass
        except Exception as exc:  # requests' ReadTimeout when the daemon is stuck
            raise SandboxError(
                f"sandbox container {sandbox_id[:12]} was not removed: {exc}"
            ) from exc

    @classmethod
    def reap_orphans(cls) -> int:
        now = time.time()
        reaped = 0
        for container in _sandbox_containers(docker_client()):
            labels = container.get("Labels") or {}
            try:
                owner_alive = Owner.decode(labels[LABEL_OWNER]).alive()
                expired = float(labels[LABEL_EXPIRES]) < now
            except (KeyError, ValueError):
                owner_alive, expired = False, True  # a malformed label is nobody's container
            if expired or not owner_alive:
                try:
                    cls.cleanup(container["Id"])
                except SandboxError:
                    continue  # one stuck orphan must not stop new sandboxes; `gc` retries
                reaped += 1
        return reaped

    def _launch(self) -> Channel:
        """Start the container; a daemon that went away since the client was made (stopped,
        restarted) is `SandboxUnavailable`, like one that never answered, and the next sandbox
        connects afresh. The docker SDK raises requests' ConnectionError for it, which would
        otherwise reach the caller as a bare exception (an env bug, not infrastructure)."""
        global _client
        import requests

        try:
            return self._start_container()
        except requests.exceptions.ConnectionError as exc:
            _client = None
            raise _unreachable(exc) from exc

    def _start_container(self) -> Channel:
        import docker.errors
        from docker.types import Ulimit

        client = docker_client()
        self.reap_orphans()
        if not image_exists(self.image):
            raise SandboxUnavailable(
                f"the sandbox image {self.image!r} is not in the Docker daemon: build it with "
                "`prime sandbox build-image` (or pass --image)"
            )
        limits = self.limits
        room = limits.memory_mb - SUPERVISOR_RESERVE_MB
        shm_mb = max(1, min(limits.shm_mb, room // 4))
        places = 2 + len(self.writable_dirs)
        tmpfs_mb = max(1, min(limits.workdir_mb, (room - shm_mb) // places))
        size = f"size={tmpfs_mb}m"
        uid, gid = SANDBOX_UID.split(":")
        writable = f"rw,exec,nosuid,nodev,{size},uid={uid},gid={gid},mode=0755"
        try:
            # The low-level API: with detach=False and stdin_open it sets StdinOnce, which the
            # high-level API cannot.
            host_config = client.api.create_host_config(
                network_mode="none",
                read_only=True,
                binds={host: {"bind": target, "mode": "ro"} for host, target in self.binds.items()},
                # exec: compiled or chmod +x programs must run from the work directory.
                tmpfs={
                    self.workdir: writable,
                    "/tmp": f"rw,exec,nosuid,nodev,{size},mode=1777",
                    **dict.fromkeys(self.writable_dirs, writable),
                },
                ipc_mode="private",
                shm_size=f"{shm_mb}m",
                mem_limit=f"{limits.memory_mb}m",
                memswap_limit=f"{limits.memory_mb}m",
                nano_cpus=int(limits.cpus * 1e9),
                pids_limit=limits.pids,
                cap_drop=["ALL"],
                cap_add=["SETUID", "SETGID", "KILL"],
                security_opt=["no-new-privileges"],
                # Limits for every process; CPU seconds are per command (child rlimits), since
                # the long-lived supervisor would otherwise use them up.
                ulimits=[
                    Ulimit(name="nofile", soft=limits.nofile, hard=limits.nofile),
                    Ulimit(
                        name="fsize", soft=limits.file_size_mb << 20, hard=limits.file_size_mb << 20
                    ),
                    Ulimit(name="core", soft=0, hard=0),
                ],
                auto_remove=True,
            )
            created = client.api.create_container(
                self.image,
                command=supervisor.command(
                    "python3",
                    self.workdir,
                    self.scratch_dirs,
                    limits.ttl_s,
                    limits.child_rlimits(),
                    SANDBOX_UID,
                ),
                user="0:0",
                working_dir=self.workdir,
                environment={"LANG": "C.UTF-8", "TMPDIR": self.tmpdir, "HOME": HOME},
                labels={
                    LABEL: "1",
                    LABEL_OWNER: Owner.current().encode(),
                    LABEL_RUN: RUN_ID,
                    LABEL_EXPIRES: str(int(time.time() + limits.ttl_s)),
                },
                hostname="sandbox",
                stdin_open=True,
                detach=False,
                network_disabled=True,
                host_config=host_config,
            )
            self.container = client.containers.get(created["Id"])
            self.id = self.container.short_id
            sock = client.api.attach_socket(
                self.container.id, params={"stdin": 1, "stdout": 1, "stderr": 1, "stream": 1}
            )
            self._started_at = time.time()
            self.container.start()
        except docker.errors.DockerException as exc:
            raise SandboxError(
                f"cannot start a sandbox container from {self.image!r}: {exc}"
            ) from exc
        return DockerAttachChannel(sock)

    def _seed(self) -> None:
        """Each writable directory starts with what the image holds there (its tmpfs hides
        it), copied in as the programs' files: a task's WORKDIR made writable keeps its files."""
        if not self.writable_dirs:
            return
        image_id = str(self.container.attrs.get("Image") or self.image)
        for path in self.writable_dirs:
            archive = image_dir_archive(image_id, path)
            if archive is not None:
                self._check_transfer(len(archive), f"the image's {path}")
                self._call({"op": "unzip", "path": path, "data": archive}, 120.0)

    def _outside_failure(self, hung: bool) -> bool:
        # Programs cannot signal the supervisor, and the OOM killer takes them first; what is
        # left is the daemon or an operator stopping the container, both on the daemon's record.
        import docker.errors

        container = self.container  # one reference: `stop` on another thread clears the field
        try:
            client = docker_client()
            client.ping()
            events = client.events(
                since=self._started_at,
                until=time.time(),
                filters={"container": container.id},
                decode=True,
            )
            actions = {str(event.get("Action", "")).split(":")[0] for event in events}
            if not hung:
                try:
                    container.reload()
                    running = container.attrs["State"]["Running"]
                except docker.errors.NotFound:  # it ended and auto_remove took it
                    running = False
                if running:
                    return True  # the attach stream broke, not the supervisor: the runtime's fault
        except Exception:  # noqa: BLE001 - a daemon that cannot answer this is itself the failure
            return True
        outside = actions & {"kill", "stop", "pause", "destroy", "restart"}
        if "die" in actions:
            # auto_remove destroys every container that died, whoever killed it: a destroy
            # after a death is that, not an operator (whose `rm -f` is on record as a kill).
            outside.discard("destroy")
        return bool(outside)

    def _describe_death(self) -> str:
        import docker.errors

        # One reference each: a `stop` on another thread (the host ending the sandbox
        # mid-command) clears the fields, and reading one twice gave an AttributeError
        # instead of this story.
        container = self.container
        if container is None:
            return ""
        channel = self._channel
        stderr = channel.diagnostics().strip()[-2000:] if channel is not None else ""
        try:
            container.reload()
            state = container.attrs["State"]
            status = (
                f"container {state['Status']}, exit code {state['ExitCode']}"
                f"{', killed for memory' if state.get('OOMKilled') else ''}"
            )
        except docker.errors.NotFound:
            status = "container is gone"
        except docker.errors.DockerException as exc:
            status = f"the Docker daemon did not answer ({exc})"
        return f"{status}. {stderr}".strip()

    def _destroy(self) -> None:
        if self.container is not None:
            self.cleanup(self.container.id)
            self.container = None
