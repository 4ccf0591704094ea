"""The calling user's own REST routes (`/api/v1/user/…`), above http/: the accounts they read
are the identity floor (accounts/), below everything that authenticates."""
