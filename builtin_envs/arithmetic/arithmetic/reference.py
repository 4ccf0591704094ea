"""The reference policy: read the expression off the prompt, compute it, answer `\\boxed{N}`.

The expression is evaluated from its syntax tree (integers, parentheses, +, - and *: what
problems.py renders), never with `eval`, so it is an independent check of the generator's own
values. The shortest possible correct reply also earns the group bonus: 1.2 on every task.
"""

from __future__ import annotations

import ast
from typing import Any

from prime_env import State

_BINARY = {ast.Add: int.__add__, ast.Sub: int.__sub__, ast.Mult: int.__mul__}


def evaluate(expression: str) -> int:
    """The value of an integer +, -, * expression; ValueError for anything else."""
    return _value(ast.parse(expression, mode="eval").body)


def _value(node: ast.expr) -> int:
    if isinstance(node, ast.Constant) and type(node.value) is int:
        return node.value
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
        return -_value(node.operand)
    if isinstance(node, ast.BinOp) and type(node.op) in _BINARY:
        return _BINARY[type(node.op)](_value(node.left), _value(node.right))
    raise ValueError(f"not an integer +, -, * expression: {ast.unparse(node)}")


def solve(messages: list[dict[str, Any]], state: State) -> str:
    expression = str(messages[-1]["content"]).removeprefix("Compute: ")
    return f"\\boxed{{{evaluate(expression)}}}"
