"""The orchestrator process: rollouts through prime_env, group advantages, batches for the trainer, policies into the sampler."""
