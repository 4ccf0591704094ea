"""The trainer process (`python -m trainer_bridge.trainer`): batches in, one optimizer step each, policies out."""
