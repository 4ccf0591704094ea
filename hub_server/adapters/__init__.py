"""LoRA adapters published on the hub: owned, versioned, public or private (docs/api.md,
"Adapters"); above lab/, whose checkpoints one can be published from."""
