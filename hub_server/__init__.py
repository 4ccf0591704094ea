"""The hub server: FastAPI app, database, blob store, simple index, uploads, eval results."""
