"""The Lab: the Tinker API for tenants' LoRA training on the hub (docs/lab.md)."""
