"""Sandboxes for running untrusted, model-written code: Docker and a local fallback."""
