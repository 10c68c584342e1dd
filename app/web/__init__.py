"""What every feature's pages share: templating (Jinja2, autoescaped), charts, the request's
dependencies, the forms' helpers and the panels other features fill; a small inline script
polls the API."""
