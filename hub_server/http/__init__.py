"""Request plumbing: FastAPI dependencies, the request-limits middleware, rate limits, app state."""
