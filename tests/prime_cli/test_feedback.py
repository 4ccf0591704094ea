"""The hub client's feedback as `prime` shows it: a transfer bar on a terminal (none in a pipe or
a log), retries as one yellow line, an installer's output passed through to stderr."""

from __future__ import annotations

import http.server
import io
import re
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
from rich.console import Console

from hub_client.client import HubClient, HubError, HubRetryPolicy
from hub_client.install import run_installer
from prime_cli.feedback import console_feedback
from tests.support import free_port

BODY = bytes(range(256)) * 4096  # 1 MiB


class _File(http.server.BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        self.send_response(200)
        self.send_header("Content-Length", str(len(BODY)))
        self.end_headers()
        self.wfile.write(BODY)

    def log_message(self, *args: object) -> None:
        """No access log on stderr."""


@pytest.fixture
def file_server() -> Iterator[str]:
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _File)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()


@pytest.mark.parametrize("terminal", [True, False])
def test_a_download_draws_a_bar_only_on_a_terminal(
    file_server: str, tmp_path: Path, terminal: bool
) -> None:
    screen = io.StringIO()
    console = Console(file=screen, force_terminal=terminal, width=120)
    with HubClient(file_server, feedback=console_feedback(console)) as client:
        client.download(f"{file_server}/wheel.whl", tmp_path / "wheel.whl")
    assert (tmp_path / "wheel.whl").read_bytes() == BODY
    assert ("download wheel.whl" in screen.getvalue()) is terminal
    assert ("1.0 MB" in screen.getvalue()) is terminal  # the bar's byte count (rich: SI units)


def test_a_retry_is_one_yellow_line() -> None:
    screen = io.StringIO()
    console = Console(file=screen, force_terminal=True, width=40)  # narrower than the line
    fast = HubRetryPolicy(first_contact_attempts=2, base_delay_s=0.01, max_delay_s=0.01)
    with (
        HubClient(
            f"http://127.0.0.1:{free_port()}", retry=fast, feedback=console_feedback(console)
        ) as client,
        pytest.raises(HubError, match="cannot reach the hub"),
    ):
        client.whoami()
    lines = [line for line in screen.getvalue().splitlines() if "retrying" in line]
    assert len(lines) == 1 and lines[0].startswith("\x1b[33m")  # one line, yellow
    assert re.sub(r"\x1b\[[0-9;]*m", "", lines[0]).endswith("(attempt 2 of 2)")


def test_without_feedback_the_client_only_logs(caplog: pytest.LogCaptureFixture) -> None:
    fast = HubRetryPolicy(first_contact_attempts=2, base_delay_s=0.01, max_delay_s=0.01)
    with (
        HubClient(f"http://127.0.0.1:{free_port()}", retry=fast) as client,
        pytest.raises(HubError),
    ):
        client.whoami()
    assert [r.name for r in caplog.records if "retrying" in r.getMessage()] == ["hub_client"]


def test_installer_output_goes_to_stderr(capfd: pytest.CaptureFixture[str]) -> None:
    console = Console(file=io.StringIO())
    command = ["python3", "-c", "print('Resolved 3 packages [notice]')"]
    run_installer(command, on_output=console_feedback(console).installer_output)
    captured = capfd.readouterr()
    assert captured.err == "Resolved 3 packages [notice]\n" and captured.out == ""
