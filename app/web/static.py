"""The site's own files: its icons (the stylesheet and scripts are served as static files)."""

from __future__ import annotations

from pathlib import Path

from fastapi import APIRouter
from fastapi.responses import FileResponse, Response

router = APIRouter(include_in_schema=False)

STATIC = Path(__file__).parent / "static"
# Browsers ask for /favicon.ico on every page whatever the page links; a day in their cache.
_ICON_HEADERS = {"Cache-Control": "public, max-age=86400"}


@router.get("/favicon.ico")
async def favicon_ico() -> Response:
    return FileResponse(STATIC / "favicon.ico", media_type="image/x-icon", headers=_ICON_HEADERS)


@router.get("/favicon.svg")
async def favicon_svg() -> Response:
    return FileResponse(STATIC / "favicon.svg", media_type="image/svg+xml", headers=_ICON_HEADERS)
