"""Finding environments: the one listing query (visibility, full text, tags, sort by downloads or
evaluations, paging) and its REST route; above registry/ and evals/, whose rows it ranks."""
