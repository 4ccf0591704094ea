"""The interception server: agent programs' model calls, in any of three API dialects, recorded
into their rollouts (server.py), one dialect per module (chat, responses, anthropic)."""
