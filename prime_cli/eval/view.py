"""`prime eval view RUN [RUN]`: the hub's run page for local runs, served on a loopback port.

RUN is a run directory, a run id or a unique prefix of one under ./outputs (as `prime eval
show`); two runs open their comparison (example by example, and each example's rollouts side by
side). The pages are the hub's own (`hub_server.web.local_view`): the same conversation view
of each sample, histogram and filters, with no hub, no push and no account. Ctrl-C stops it.
"""

from __future__ import annotations

import socket
import webbrowser
from pathlib import Path
from typing import Any

import click

from prime_cli.errors import CliError
from prime_cli.eval.runs import find_run
from prime_cli.messages import message_console
from prime_env.eval_run_dir import EvalRunDir
from prime_env.summary import Summary
from registry_index.resolve import InvalidEnvRef, parse_env_id

LOOPBACK = "127.0.0.1"


def _place(env: str | None) -> tuple[str, str]:
    """(owner, name) the run's pages sit under: the hub's for a hub env, `local/NAME` else."""
    if env:
        try:
            owner, name, _ = parse_env_id(env)
            return owner or "local", name
        except InvalidEnvRef:
            pass  # a file or directory path: its last part names it
        stem = Path(env).stem or "env"
        return "local", stem
    return "local", "env"


def read_run(directory: Path, taken: set[str]) -> dict[str, Any]:
    """A run directory as the viewer's `LocalRun` fields (its records as JSON objects)."""
    run_dir = EvalRunDir(directory)
    meta = run_dir.metadata()
    owner, name = _place(meta.hub_env or meta.env)
    run_id = meta.run_id
    while run_id in taken:  # the same run twice, or two runs of one id in other output dirs
        run_id += "-2"
    taken.add(run_id)
    records = [record.model_dump(mode="json") for record in run_dir.read_results()]
    return {
        "id": run_id,
        "owner": owner,
        "name": name,
        "model_name": meta.model,
        "env_version": meta.env_version or "local",
        "status": meta.status or "unknown",
        "created_at": meta.started_at,
        "summary": meta.summary or Summary(),
        "metadata": {k: v for k, v in meta.to_json().items() if k not in ("summary", "config")},
        "records": records,
    }


@click.command("view")
@click.argument("targets", nargs=-1, required=True, metavar="RUN [RUN]")
@click.option(
    "--port", type=click.IntRange(0, 65535), default=0, show_default=True,
    help="the loopback port to serve on (0: a free one)",
)  # fmt: skip
@click.option("--open", "open_browser", is_flag=True, help="open the page in a web browser")
@click.option(
    "-o", "--output-dir", type=Path, default=Path("outputs"), show_default=True,
    help="where run ids are looked up (OUTPUT/evals/…)",
)  # fmt: skip
def view_cmd(targets: tuple[str, ...], port: int, open_browser: bool, output_dir: Path) -> None:
    """Open local runs in the hub's run page on 127.0.0.1 (two runs: their comparison).

    RUN is a run DIRECTORY, a run id or a unique prefix of one; no hub is needed.
    """
    if len(targets) > 2:
        raise CliError(f"prime eval view takes one run, or two to compare; got {len(targets)}")
    taken: set[str] = set()
    runs = []
    for target in targets:
        found = find_run(target, None, output_dir)
        assert found.directory is not None  # with no hub, a run is a directory or an error
        runs.append(read_run(found.directory, taken))
    from prime_cli.hub import local_viewer

    app = local_viewer(runs)
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((LOOPBACK, port))
    except OSError as exc:
        sock.close()
        raise CliError(
            f"cannot listen on {LOOPBACK}:{port}: {exc.strerror}; try --port 0"
        ) from None
    sock.listen(128)  # connections wait from now on, before the server has started
    url = f"http://{LOOPBACK}:{sock.getsockname()[1]}/"
    what = "comparison" if len(runs) == 2 else "run"
    message_console(stderr=True).print(f"serving the {what} at {url} (Ctrl-C stops)")
    click.echo(url)
    if open_browser:
        webbrowser.open(url)
    import uvicorn

    server = uvicorn.Server(uvicorn.Config(app, log_level="warning", access_log=False))
    server.run(sockets=[sock])
