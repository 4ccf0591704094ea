"""Random integer arithmetic problems whose difficulty is one knob.

Expressions are built as trees and evaluated on the tree (never with `eval` on text), and
rendered with the minimum parentheses needed, so the printed problem and the answer agree
by construction.
"""

from __future__ import annotations

import random
from dataclasses import dataclass

# difficulty -> (operator count range, largest operand, operators)
LEVELS: dict[int, tuple[tuple[int, int], int, str]] = {
    1: ((1, 1), 9, "+"),
    2: ((1, 2), 99, "+-"),
    3: ((2, 3), 99, "+-*"),
    4: ((3, 4), 999, "+-*"),
    5: ((4, 6), 9999, "+-*"),
}
PRECEDENCE = {"+": 1, "-": 1, "*": 2}


@dataclass(frozen=True)
class Node:
    """A number (op is None) or `left op right`."""

    value: int
    op: str | None = None
    left: Node | None = None
    right: Node | None = None

    def render(self) -> str:
        if self.op is None:
            return str(self.value) if self.value >= 0 else f"({self.value})"
        assert self.left is not None and self.right is not None
        left = self.left.render()
        right = self.right.render()
        if self.left.op and PRECEDENCE[self.left.op] < PRECEDENCE[self.op]:
            left = f"({left})"
        # The right operand also needs brackets at equal precedence for - (a - (b + c)).
        if self.right.op and (
            PRECEDENCE[self.right.op] < PRECEDENCE[self.op]
            or (PRECEDENCE[self.right.op] == PRECEDENCE[self.op] and self.op == "-")
        ):
            right = f"({right})"
        return f"{left} {self.op} {right}"


def _apply(op: str, a: int, b: int) -> int:
    return a + b if op == "+" else a - b if op == "-" else a * b


def _build(rng: random.Random, ops: int, largest: int, operators: str) -> Node:
    if ops == 0:
        return Node(rng.randint(0 if largest < 10 else 1, largest))
    left_ops = rng.randint(0, ops - 1)
    op = rng.choice(operators)
    # Keep products readable: a multiplication's operands are at most two digits.
    bound = min(largest, 99) if op == "*" else largest
    left = _build(rng, left_ops, bound, operators)
    right = _build(rng, ops - 1 - left_ops, bound, operators)
    return Node(_apply(op, left.value, right.value), op, left, right)


def generate(difficulty: int, rng: random.Random) -> tuple[str, int]:
    """One (expression text, integer answer) at `difficulty` (1 easiest … 5 hardest)."""
    if difficulty not in LEVELS:
        raise ValueError(f"difficulty must be one of {sorted(LEVELS)}, got {difficulty!r}")
    (low, high), largest, operators = LEVELS[difficulty]
    tree = _build(rng, rng.randint(low, high), largest, operators)
    return tree.render(), tree.value
