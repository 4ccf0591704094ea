"""The project's scripts (benches, checks, setup helpers) as a regular package.

A regular package, not a namespace one: gguf 0.11 and accelerate 1.1 (the declared floors) install
a top-level `scripts` package of their own, which would otherwise shadow this one for
`from scripts.… import …` in the tests and benches.
"""
