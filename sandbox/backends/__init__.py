"""The places a sandbox can run: a hardened Docker container, or a supervisor on this machine."""
