"""Users, organisations, tokens and authentication: the identity floor every domain stands on.

No routes (user/ has the caller's own) and no resource rules: who may read an environment or
a run is kept with it (registry.access, evals.access)."""
