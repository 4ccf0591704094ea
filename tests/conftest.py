"""Shared test configuration. Fixtures that belong to one layer live in that layer's conftest."""
