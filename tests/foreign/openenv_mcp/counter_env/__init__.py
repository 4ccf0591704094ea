"""An OpenEnv environment whose actions are MCP tool calls (openenv-core's `MCPEnvironment`),
run by tests/e2e/test_foreign_openenv.py from a directory on PYTHONPATH."""
