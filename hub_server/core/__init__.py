"""Shared foundations: settings, database, blob store, errors, column types, caches."""
