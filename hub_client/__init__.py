"""The hub client library: the typed REST client, its settings, and installing environments.

Used by the `prime` commands, the evaluator and the trainer; it never imports `prime_cli`.
"""
