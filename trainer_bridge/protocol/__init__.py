"""What the run's processes exchange on disk: the run dir's layout, `STABLE` directories, batches, policy broadcasts."""
