"""`prime train`: async RL on a hub environment (orchestrator, inference backends, trainer).

Imports `prime_env` (rollouts, clients, rewards), never `prime_cli`.
"""
