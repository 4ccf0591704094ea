"""Server-rendered web pages (Jinja2 templates and static assets served by the hub itself)."""
