"""An evaluation run pushed to a hub over its API as `prime eval push` does it: create the run,
push its samples in batches, finalize it."""

from __future__ import annotations

from typing import Any


def push_eval(
    http: Any, token: str, run: dict[str, Any], samples: list[dict[str, Any]], *, batch: int
) -> str:
    """Push `samples` as a run described by `run` (the create body) and return its id; `http`
    is a TestClient or an httpx client on the hub's URL."""
    headers = {"Authorization": f"Bearer {token}"}
    created = http.post("/api/v1/evaluations/", headers=headers, json=run)
    assert created.status_code == 200, created.text
    run_id = str(created.json()["evaluation_id"])
    for start in range(0, len(samples), batch):
        pushed = http.post(
            f"/api/v1/evaluations/{run_id}/samples",
            headers=headers,
            json={"samples": samples[start : start + batch]},
        )
        assert pushed.status_code == 200, pushed.text
    done = http.post(f"/api/v1/evaluations/{run_id}/finalize", headers=headers, json={})
    assert done.status_code == 200, done.text
    return run_id
