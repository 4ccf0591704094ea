"""The five built-in environments (each a standalone package in its own directory) and the
tooling that publishes them to a hub: see `builtin_envs.publish`."""
