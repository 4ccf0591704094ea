"""Bounds every side shares.

`MAX_STORED_INT`: the largest integer any of the hub's columns stores, PostgreSQL's INTEGER
(SQLite holds more). Every integer a request carries (an index, a size, a page number) is
bounded by it where it could reach a column or a query, so a `2**63` is a 400, never an
overflow (a 500).

`MAX_ABS_SCORE`: the largest score (a reward, a metric, a declared range's end) in size. Far
beyond any real reward, small enough that 10^9 of them still sum to a finite float, so no
mean over a run can overflow into an `inf` that ranks first.
"""

MAX_STORED_INT = 2**31 - 1
MAX_ABS_SCORE = 1e15
