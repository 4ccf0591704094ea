"""The environment SDK: tasks, harnesses, rubrics, environments, the rollout runner, model clients.

Everything an environment author or a tool built on environments needs is importable from
here; submodules are implementation detail.
"""

from .clients.base import ChatResponse, ModelClient, SamplingArgs, Usage
from .environment import Environment
from .errors import (
    DatasetError,
    EnvironmentNotFound,
    InfraError,
    JudgeError,
    ModelError,
    RubricError,
)
from .harnesses import (
    COMPLETED,
    ENV_DONE,
    LENGTH,
    MAX_TURNS,
    PROGRAM_FAILED,
    TIMEOUT,
    TOKEN_BUDGET,
    Conversation,
    Harness,
    MCPTools,
    MultiTurn,
    Program,
    SimulatedUser,
    SingleTurn,
    ToolLoop,
)
from .loading import installed_environments, is_local_path, load, parse_env_id
from .parsers import BoxedParser, LastLineParser, Parser, XMLParser, last_assistant_text
from .record import SCHEMA, ErrorInfo, RolloutRecord, Timing, TokenUsage, Turn
from .reference import Reference, ReferenceClient
from .rubric import JudgeRubric, Rubric, Scores
from .runner import error_info, run_rollouts, run_rollouts_sync
from .state import State
from .summary import Summary, pass_at_k, summarize
from .tasks import Task, TaskSet
from .tools import Tool, tool_schema

__all__ = [
    "COMPLETED",
    "ENV_DONE",
    "LENGTH",
    "MAX_TURNS",
    "PROGRAM_FAILED",
    "SCHEMA",
    "TIMEOUT",
    "TOKEN_BUDGET",
    "BoxedParser",
    "ChatResponse",
    "Conversation",
    "DatasetError",
    "Environment",
    "EnvironmentNotFound",
    "ErrorInfo",
    "Harness",
    "InfraError",
    "JudgeError",
    "JudgeRubric",
    "LastLineParser",
    "MCPTools",
    "ModelClient",
    "ModelError",
    "MultiTurn",
    "Parser",
    "Program",
    "Reference",
    "ReferenceClient",
    "RolloutRecord",
    "Rubric",
    "RubricError",
    "SamplingArgs",
    "Scores",
    "SimulatedUser",
    "SingleTurn",
    "State",
    "Summary",
    "Task",
    "TaskSet",
    "Timing",
    "TokenUsage",
    "Tool",
    "ToolLoop",
    "Turn",
    "Usage",
    "XMLParser",
    "error_info",
    "installed_environments",
    "is_local_path",
    "last_assistant_text",
    "load",
    "parse_env_id",
    "pass_at_k",
    "run_rollouts",
    "run_rollouts_sync",
    "summarize",
    "tool_schema",
]
