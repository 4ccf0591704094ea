"""Checkpoints of a run: `checkpoints/step_N/`, the trainer's half and the orchestrator's, `STABLE` once both are written."""
