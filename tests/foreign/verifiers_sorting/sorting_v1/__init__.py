from sorting_v1.taskset import SortingEnv, SortingTaskset

__all__ = ["SortingEnv", "SortingTaskset"]
