"""The `prime` command line."""
