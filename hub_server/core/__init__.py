"""Shared foundations with no HTTP in them: settings, database, blob store, errors, columns."""
