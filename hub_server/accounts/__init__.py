"""Users, organisations, tokens, authentication and the visibility rule."""
