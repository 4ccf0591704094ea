"""The JSON wire schemas of the hub's REST API (`docs/api.md`), defined once for both sides.

The hub's routes use these models as their request bodies and response models (so FastAPI's
OpenAPI document describes exactly them), and the `prime` CLI's typed client parses every answer
with the same models (`model_validate`), so the two cannot drift apart. One module per domain:

- `envelope`: the `{"data": …}` envelope and the paged listing shape
- `environments`: owners, environment summaries and details, the metadata patch, tags
- `versions`: versions, their files, install records, yank requests
- `push`: the `prime env push` flow (resolve, reserve, PUT, finalize)
- `accounts`: `whoami` and the token behind it
- `evals`: evaluations, their samples and batches
- `leaderboard`: an environment's leaderboard
- `adapters`: LoRA adapters, their versions and files, a push's options, a Lab checkpoint to publish
- `errors`: the one error body, `{"detail": …}`

Response models ignore fields they do not know (pydantic's default), so a newer hub's additions
do not break an older client; request models say which fields the hub reads.
"""
