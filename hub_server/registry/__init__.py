"""Environments: the REST API, publishing, the push upload flow and its state."""
