"""The API documentation pages, with Swagger UI's and ReDoc's files served by the app itself
(from the pinned fastapi-offline package), so /docs works on a network without internet."""

from __future__ import annotations

import functools
from pathlib import Path

import fastapi_offline
from fastapi import FastAPI
from fastapi.openapi.docs import get_redoc_html, get_swagger_ui_html
from fastapi.responses import HTMLResponse, Response
from fastapi.staticfiles import StaticFiles

ASSETS_URL = "/docs/assets"
ASSETS_DIR = Path(fastapi_offline.__file__).resolve().parent / "static"
REDOC_URL = "/docs/redoc.js"
# ReDoc's side menu shows its maker's logo from their CDN, which the CSP (rightly) blocks and
# a network without internet cannot reach; the bundle is served with our own icon in its place.
REDOC_CDN_LOGO = "https://cdn.redoc.ly/redoc/logo-mini.svg"


@functools.cache
def redoc_bundle() -> bytes:
    text = (ASSETS_DIR / "redoc.standalone.js").read_text(encoding="utf-8")
    return text.replace(REDOC_CDN_LOGO, "/favicon.svg").encode("utf-8")


def add_offline_docs(app: FastAPI) -> None:
    """/docs (Swagger UI) and /redoc; the app must be created with docs_url=None and
    redoc_url=None."""
    app.mount(ASSETS_URL, StaticFiles(directory=ASSETS_DIR), name="docs-assets")

    @app.get("/docs", include_in_schema=False)
    def swagger_ui() -> HTMLResponse:
        return get_swagger_ui_html(
            openapi_url=app.openapi_url or "/openapi.json",
            title=f"{app.title} API",
            swagger_js_url=f"{ASSETS_URL}/swagger-ui-bundle.js",
            swagger_css_url=f"{ASSETS_URL}/swagger-ui.css",
            swagger_favicon_url=f"{ASSETS_URL}/favicon.png",
        )

    @app.get(REDOC_URL, include_in_schema=False)
    async def redoc_js() -> Response:
        return Response(
            redoc_bundle(),
            media_type="text/javascript; charset=utf-8",
            headers={"Cache-Control": "public, max-age=86400"},
        )

    @app.get("/redoc", include_in_schema=False)
    def redoc() -> HTMLResponse:
        return get_redoc_html(
            openapi_url=app.openapi_url or "/openapi.json",
            title=f"{app.title} API",
            redoc_js_url=REDOC_URL,
            redoc_favicon_url=f"{ASSETS_URL}/favicon.png",
            with_google_fonts=False,
        )
