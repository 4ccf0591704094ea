"""Harbor task directories (Terminal-Bench's format) as environments of this SDK: read as files
(task_dir.py), run in their own containers with tests/test.sh as the rubric (environment.py).
`prime env import harbor DIR -o NAME` packages a directory of them as an environment."""

from .environment import HarborHarness, HarborRubric, load_harbor, verify
from .task_dir import HarborFormatError, HarborTask, read_task, read_tasks

__all__ = [
    "HarborFormatError",
    "HarborHarness",
    "HarborRubric",
    "HarborTask",
    "load_harbor",
    "read_task",
    "read_tasks",
    "verify",
]
