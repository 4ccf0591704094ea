"""`prime train`: an async RL loop over prime_env environments."""
