"""Fakes shared by the tests and the benches (scripts/bench_*.py): hosted-model providers
(OpenAI, Anthropic) on loopback with latency and fault injection, and small environments."""
