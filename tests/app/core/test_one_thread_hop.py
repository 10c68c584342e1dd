"""Every route does its database work in one thread hop (app.web.deps), so the wedge of
issue 9 cannot come back: a request holding a connection while it queues for a second thread.

Read from the code, not run: each route's dependencies, each at any depth, are `async def`
and open no session (a sync dependency runs in a thread of its own, and a session it opened
stays checked out while the handler queues for the next); a handler is `async def`, and
what it runs on the event loop opens no session either (its database work is the function
it hands to `.run()`); a plain `def` handler is allowed only where it reaches no database at
all (the API docs pages).
"""

from __future__ import annotations

import inspect
import sys
import types
from collections.abc import Callable, Iterator
from typing import Annotated, Any

from fastapi import Depends, FastAPI
from fastapi.routing import APIRoute
from sqlalchemy import orm

from app.core import database
from app.main import HEALTH_PATH, create_app

# What opens a session or takes a connection from the pool.
OPENERS: dict[object, str] = {
    database.session_scope: "session_scope",
    database.new_session: "new_session",
    database.get_engine: "get_engine",
    database.engine_for: "engine_for",
    database.get_probe_engine: "get_probe_engine",
    database.probe: "probe",
    database.ping: "ping",
    orm.Session: "Session",
    orm.sessionmaker: "sessionmaker",
}
# The health check reads over a connection of its own, in threads of its own (deps).
HEALTH_OPENERS = {"probe", "ping", "get_probe_engine"}


def _code_objects(code: types.CodeType, *, nested: bool) -> Iterator[types.CodeType]:
    yield code
    if nested:
        for const in code.co_consts:
            if isinstance(const, types.CodeType):
                yield from _code_objects(const, nested=True)


def _ours(obj: object) -> bool:
    # The app's code (and this file's, for the check of the check below).
    module = getattr(obj, "__module__", None) or ""
    return module == "app" or module.startswith(("app.", "tests."))


def reaches(fn: Callable[..., Any], *, nested: bool, depth: int = 8) -> set[str]:
    """The session openers `fn` calls, followed through the app's own functions and the
    classes it builds. `nested=False`: only `fn`'s own body, not the functions defined in it
    (a handler's body runs on the event loop; what it hands to `.run()` runs in a thread)."""
    found: set[str] = set()
    seen: set[int] = set()

    def visit(obj: object, level: int, whole: bool) -> None:
        try:
            opener = obj in OPENERS
        except TypeError:  # unhashable: a value, not a function
            return
        if opener:
            found.add(OPENERS[obj])
            return
        if id(obj) in seen or level > depth:
            return
        seen.add(id(obj))
        if isinstance(obj, type):
            if _ours(obj):
                # Building one runs its constructor; its other methods run where called.
                for name in ("__init__", "__post_init__", "__new__"):
                    method = obj.__dict__.get(name)
                    if isinstance(method, types.FunctionType):
                        visit(method, level + 1, True)
            return
        func = inspect.unwrap(obj) if callable(obj) else obj
        if isinstance(func, types.MethodType):
            func = func.__func__
        if not isinstance(func, types.FunctionType) or not _ours(func):
            return
        names: set[str] = set()
        for code in _code_objects(func.__code__, nested=whole):
            names.update(code.co_names)
        closure = [c.cell_contents for c in func.__closure__ or () if _filled(c)]
        for target in closure:
            visit(target, level + 1, True)
        scope = func.__globals__
        for name in names:
            # A global, or a module a function imports inside itself (its name is there too).
            target = scope.get(name, sys.modules.get(name))
            if isinstance(target, types.ModuleType):
                # `module.function(...)`: the attribute is among the names too.
                for attribute in names:
                    visit(getattr(target, attribute, None), level + 1, True)
            elif target is not None:
                visit(target, level + 1, True)

    visit(fn, 0, nested)
    return found


def _filled(cell: Any) -> bool:
    try:
        cell.cell_contents  # noqa: B018
    except ValueError:
        return False
    return True


def api_routes(
    routes: list[Any], prefix: str = "", extra: tuple[Any, ...] = ()
) -> Iterator[tuple[str, APIRoute, tuple[Any, ...]]]:
    """Every APIRoute with its full path and the dependencies its includes add, whether
    `include_router` copied the routes in (older FastAPI) or keeps the router (newer)."""
    for route in routes:
        if isinstance(route, APIRoute):
            yield prefix + route.path, route, extra
        elif (router := getattr(route, "original_router", None)) is not None:
            context = route.include_context
            yield from api_routes(
                router.routes, prefix + context.prefix, extra + tuple(context.dependencies)
            )
        # Anything else is Starlette's (the OpenAPI schema, mounted static files).


def dependency_calls(route: APIRoute, extra: tuple[Any, ...]) -> Iterator[Callable[..., Any]]:
    yield from (depends.dependency for depends in extra if depends.dependency is not None)
    stack = list(route.dependant.dependencies)
    while stack:
        dependant = stack.pop()
        if dependant.call is not None:
            yield dependant.call
        stack.extend(dependant.dependencies)


def _runs_on_the_loop(call: Callable[..., Any]) -> bool:
    """As FastAPI judges it: an `async def`, or an object whose `__call__` is one (the
    security schemes, such as HTTPBearer, that put the Authorize button on /docs)."""
    if inspect.iscoroutinefunction(call):
        return True
    dunder = getattr(type(call), "__call__", None)  # noqa: B004
    return not inspect.isclass(call) and inspect.iscoroutinefunction(dunder)


def problems(app: FastAPI) -> list[str]:
    found = []
    for path, route, extra in api_routes(list(app.routes)):
        where = f"{sorted(route.methods)} {path}"
        for call in dependency_calls(route, extra):
            name = getattr(call, "__qualname__", repr(call))
            if not _runs_on_the_loop(call):
                # FastAPI runs it in a thread of its own: a hop before the handler's.
                found.append(f"{where}: dependency {name} is not async def")
            if opened := reaches(call, nested=True):
                found.append(f"{where}: dependency {name} opens {sorted(opened)}")
        handler = route.endpoint
        if inspect.iscoroutinefunction(handler):
            opened = reaches(handler, nested=False)
            if path == HEALTH_PATH:
                opened -= HEALTH_OPENERS
            if opened:
                found.append(f"{where}: opens {sorted(opened)} on the event loop, not in .run()")
        elif opened := reaches(handler, nested=True):
            found.append(f"{where}: a plain def that touches the database ({sorted(opened)})")
    return found


def test_every_route_does_its_database_work_in_one_thread_hop() -> None:
    app = create_app()
    paths = {path for path, _, _ in api_routes(list(app.routes))}
    # The pages, the API, the course's staff views, /metrics and /admin/system, the docs.
    assert len(paths) > 40
    assert {HEALTH_PATH, "/metrics", "/admin/system", "/courses/{course}/extensions"} <= paths
    assert problems(app) == []


def get_db() -> Iterator[orm.Session]:
    """The dependency that brought the wedge (before issue 9)."""
    with database.session_scope() as session:
        yield session


async def reads_header() -> str:
    return "no database here"


def wedge(session: Annotated[orm.Session, Depends(get_db)]) -> int:
    return 1


def own_session() -> int:
    with database.session_scope() as session:
        return int(session.scalar(database.text("SELECT 1")) or 0)


async def on_the_loop() -> int:
    return len(database.new_session().info)


async def fine(header: Annotated[str, Depends(reads_header)]) -> str:
    return header


def test_the_check_finds_a_session_dependency_and_a_plain_handler_with_a_session() -> None:
    # What the check above is for: the shapes that wedge, and one it must let through.
    app = FastAPI()
    app.get("/wedge")(wedge)
    app.get("/own-session")(own_session)
    app.get("/on-the-loop")(on_the_loop)
    app.get("/fine")(fine)
    found = problems(app)
    assert any("/wedge" in p and "not async def" in p for p in found), found
    assert any("/wedge" in p and "session_scope" in p for p in found), found
    assert any("/own-session" in p and "plain def" in p for p in found), found
    assert any("/on-the-loop" in p and "event loop" in p for p in found), found
    assert not any("/fine" in p for p in found), found
