"""Fake hosted-model providers (OpenAI, Anthropic) on loopback, with latency and fault injection."""
