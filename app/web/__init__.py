"""Server-rendered pages (Jinja2, autoescaped); a small inline script polls the API."""
