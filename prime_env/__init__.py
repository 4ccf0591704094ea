"""The environment SDK: tasks, harnesses, rubrics, environments, the rollout runner, model clients."""
