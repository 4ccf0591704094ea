"""The per-owner package index pip and uv read (PEP 503/691/658) and the twine upload endpoint."""
