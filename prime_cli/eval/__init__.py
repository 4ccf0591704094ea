"""`prime eval …`: run evaluations, push their results, read them back."""
