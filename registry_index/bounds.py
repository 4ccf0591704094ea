"""The largest integer any of the hub's columns stores: PostgreSQL's INTEGER (SQLite holds
more). Every integer a request carries (an index, a size, a page number) is bounded by it
where it could reach a column or a query, so a `2**63` is a 400, never an overflow (a 500)."""

MAX_STORED_INT = 2**31 - 1
