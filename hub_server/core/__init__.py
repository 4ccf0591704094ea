"""Shared foundations: settings, database, blob store, HTTP errors, rate limits, process state."""
