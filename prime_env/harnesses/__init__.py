"""Harnesses: how the model is run on one task."""

from .base import COMPLETED, ENV_DONE, LENGTH, MAX_TURNS, TIMEOUT, TOKEN_BUDGET, Harness
from .mcp_tools import MCPTools
from .multi_turn import MultiTurn
from .program import PROGRAM_FAILED, Program
from .single_turn import SingleTurn
from .tool_loop import ToolLoop
from .user_sim import Conversation, SimulatedUser

__all__ = [
    "COMPLETED",
    "ENV_DONE",
    "LENGTH",
    "MAX_TURNS",
    "PROGRAM_FAILED",
    "TIMEOUT",
    "TOKEN_BUDGET",
    "Conversation",
    "Harness",
    "MCPTools",
    "MultiTurn",
    "Program",
    "SimulatedUser",
    "SingleTurn",
    "ToolLoop",
]
