"""Every CLI test runs with the hub client's isolation (a throwaway HOME, no hub variables)."""

from tests.hub_client.conftest import isolated_prime_home

__all__ = ["isolated_prime_home"]
