"""`prime env …`: create, build, publish, find, install and fetch environments."""
