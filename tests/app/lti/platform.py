"""An LTI 1.3 platform (an LMS, as far as a tool can tell) that the tests run on loopback.

Built on lti1p3platform, an independent implementation of the platform side: it makes the
OIDC login initiation, signs the launches (resource links and deep-linking requests) with the
platform's key, issues the services' access tokens after checking the tool's signed client
assertion against the tool's own key set (fetched from the running service), checks those
tokens on every service call, and checks the tool's signed deep-linking responses.

What lti1p3platform leaves to its user is written here, small: the HTTP server (Starlette under
uvicorn), the LMS's data (users, courses, links, grade columns, scores, rosters), the service
answers in the shapes the specs give (a line item container is a JSON array; the roster's next
page is a `Link` header), and three Canvas behaviours the tests need: scores refused while a
course is unpublished, Canvas's own late penalty (judged by the submission time the score
carries, else by when it arrived), and a grade column made from a deep link's line item.
"""

from __future__ import annotations

import html
import json
import re
import secrets
import socket
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any
from urllib.parse import urlencode

import jwt
import uvicorn
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa
from lti1p3platform.ltiplatform import LTI1P3PlatformConfAbstract
from lti1p3platform.message_launch import LTIAdvantageMessageLaunchAbstract
from lti1p3platform.oidc_login import OIDCLoginAbstract
from lti1p3platform.registration import Registration
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import HTMLResponse, JSONResponse, Response
from starlette.routing import Route

LEARNER = "http://purl.imsglobal.org/vocab/lis/v2/membership#Learner"
INSTRUCTOR = "http://purl.imsglobal.org/vocab/lis/v2/membership#Instructor"
TA = "http://purl.imsglobal.org/vocab/lis/v2/membership/Instructor#TeachingAssistant"
SCORE_SCOPE = "https://purl.imsglobal.org/spec/lti-ags/scope/score"
LINEITEM_SCOPE = "https://purl.imsglobal.org/spec/lti-ags/scope/lineitem"
NRPS_SCOPE = "https://purl.imsglobal.org/spec/lti-nrps/scope/contextmembership.readonly"
CANVAS_SUBMISSION = "https://canvas.instructure.com/lti/submission"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class ServerThread:
    """An ASGI app under uvicorn on loopback, in a thread of this process."""

    def __init__(self, app: Any, port: int | None = None) -> None:
        self.port = port or free_port()
        self.base = f"http://127.0.0.1:{self.port}"
        config = uvicorn.Config(app, host="127.0.0.1", port=self.port, log_level="warning")
        self.server = uvicorn.Server(config)
        self.thread = threading.Thread(target=self.server.run, daemon=True)

    def __enter__(self) -> ServerThread:
        self.thread.start()
        deadline = time.monotonic() + 30
        while not self.server.started and time.monotonic() < deadline:
            time.sleep(0.02)
        assert self.server.started, "the server did not start within 30 s"
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.should_exit = True
        self.thread.join(timeout=10)


def rsa_pem_pair() -> tuple[str, str]:
    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    private = key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    ).decode()
    public = (
        key.public_key()
        .public_bytes(serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo)
        .decode()
    )
    return private, public


class _Config(LTI1P3PlatformConfAbstract):
    def init_platform_config(self, **kwargs: Any) -> None:
        self._registration = kwargs["registration"]

    def get_registration_by_params(self, **kwargs: Any) -> Registration:
        return self._registration  # type: ignore[return-value]


class _Login(OIDCLoginAbstract):
    def set_lti_message_hint(self, **kwargs: Any) -> None:
        self._lti_message_hint = kwargs["hint"]

    def get_redirect(self, url: str) -> str:
        return url


class _Launch(LTIAdvantageMessageLaunchAbstract):
    def __init__(self, params: dict[str, str], config: _Config) -> None:
        super().__init__(request=None, platform_config=config)  # type: ignore[arg-type]
        self._params = params

    def get_preflight_response(self) -> dict[str, Any]:
        return self._params

    def render_launch_form(self, launch_data: dict[str, Any], **kwargs: Any) -> dict[str, Any]:
        return launch_data


@dataclass
class Person:
    sub: str
    name: str
    email: str
    # One role URI, or the list the LMS sends (context, institution and system roles mixed).
    role: str | list[str] = LEARNER
    status: str = "Active"


@dataclass
class LineItem:
    id: str
    label: str
    score_maximum: float
    resource_id: str = ""
    tag: str = ""
    resource_link_id: str = ""
    end: datetime | None = None  # the due date, for Canvas's late penalty
    # What the gradebook holds per student: the score after any late penalty.
    grades: dict[str, float] = field(default_factory=dict)
    received: list[dict[str, Any]] = field(default_factory=list)


@dataclass
class Course:
    id: str
    title: str
    published: bool = True
    late_penalty: float = 0.0  # Canvas's late policy: the share taken off a late score
    members: list[str] = field(default_factory=list)
    line_items: dict[str, LineItem] = field(default_factory=dict)
    # A person's role in this course where it is not their usual one (an instructor of their
    # own sandbox who is a learner elsewhere).
    roles: dict[str, str | list[str]] = field(default_factory=dict)

    def roles_of(self, person: Person) -> list[str]:
        role = self.roles.get(person.sub, person.role)
        return list(role) if isinstance(role, list) else [role]


@dataclass
class Link:
    id: str
    course_id: str
    title: str
    custom: dict[str, str] = field(default_factory=dict)
    line_item_id: str = ""


class TestPlatform:
    """One LMS with one registration of the tool; `issuer`/`client_id` unique per instance."""

    __test__ = False  # not a test class, for pytest

    def __init__(
        self, *, tool_base: str, issuer: str | None = None, paths: dict[str, str] | None = None
    ) -> None:
        self.tool_base = tool_base.rstrip("/")
        self.port = free_port()
        self.base = f"http://127.0.0.1:{self.port}"
        self.issuer = issuer or f"{self.base}/platform-{secrets.token_hex(3)}"
        self.client_id = f"client-{secrets.token_hex(4)}"
        self.deployment_id = f"deployment-{secrets.token_hex(3)}"
        # The registration's name in kernelgrader; its key set URL is the one this LMS was
        # given, and the only key set it checks the tool's signatures against.
        self.slug = f"lms-{secrets.token_hex(4)}"
        self.tool_key_set_url = f"{self.tool_base}/lti/jwks/{self.slug}"
        # Endpoint paths; a test may give an LMS's own (README values).
        self.paths = {
            "auth": "/auth",
            "token": "/token",
            "jwks": "/jwks",
            **(paths or {}),
        }
        self.private_pem, self.public_pem = rsa_pem_pair()
        self.people: dict[str, Person] = {}
        self.courses: dict[str, Course] = {}
        self.links: dict[str, Link] = {}
        self.nrps_page_size = 2
        self.deep_link_results: list[list[dict[str, Any]]] = []
        # Called with each score as it arrives, before it is answered (a test changes what
        # kernelgrader holds while a score is on its way).
        self.on_score: Callable[[dict[str, Any]], None] | None = None
        # Tests that forge launches change the next ones: claims to overlay, expiry.
        self.tamper: Any = None
        self.expires_in = 300
        # The `aud` a tool's token request must carry (D2L names one; others take the URL).
        self.token_audience = ""
        self.token_audiences: list[str] = []
        # What the tests that attack the tool look at: how often the key set was read, the
        # client assertions the tool sent, and a roster answer to fail with.
        self.jwks_fetches = 0
        self.assertions: list[str] = []
        self.roster_failure: tuple[int, str] | None = None
        self._counter = 0
        self.server = ServerThread(self._app(), port=self.port)

    # --- setting up the LMS ---------------------------------------------------------------

    def registration(self) -> Registration:
        return (
            Registration()
            .set_iss(self.issuer)
            .set_client_id(self.client_id)
            .set_deployment_id(self.deployment_id)
            .set_oidc_login_url(f"{self.tool_base}/lti/login")
            .set_launch_url(f"{self.tool_base}/lti/launch")
            .set_deeplink_launch_url(f"{self.tool_base}/lti/launch")
            .set_platform_public_key(self.public_pem)
            .set_platform_private_key(self.private_pem)
            .set_tool_key_set_url(self.tool_key_set_url)
        )

    def serve_at(self, **paths: str) -> None:
        """Serve the LMS's endpoints at these paths (an LMS's own, from the README)."""
        self.paths.update(paths)
        self.server = ServerThread(self._app(), port=self.port)

    def config(self) -> _Config:
        return _Config(registration=self.registration())

    def url(self, name: str) -> str:
        return self.base + self.paths[name]

    def values(self) -> dict[str, str]:
        """What a site administrator registers in kernelgrader for this LMS."""
        return {
            "name": "Test LMS",
            "issuer": self.issuer,
            "client_id": self.client_id,
            "deployment_ids": self.deployment_id,
            "auth_login_url": self.url("auth"),
            "auth_token_url": self.url("token"),
            "key_set_url": self.url("jwks"),
        }

    def person(self, name: str, email: str, role: str = LEARNER) -> Person:
        self._counter += 1
        person = Person(
            sub=f"user-{self._counter}-{secrets.token_hex(3)}", name=name, email=email, role=role
        )
        self.people[person.sub] = person
        return person

    def course(self, title: str, *members: Person, published: bool = True) -> Course:
        course = Course(id=f"ctx-{secrets.token_hex(4)}", title=title, published=published)
        course.members = [m.sub for m in members]
        self.courses[course.id] = course
        return course

    def link(self, course: Course, title: str, custom: dict[str, str] | None = None) -> Link:
        link = Link(
            id=f"rl-{secrets.token_hex(4)}", course_id=course.id, title=title, custom=custom or {}
        )
        self.links[link.id] = link
        return link

    def login_initiation(
        self, person: Person, *, link: Link | None = None, deep_link_in: Course | None = None
    ) -> str:
        """The tool's OIDC login URL with the parameters an LMS sends (lti1p3platform's)."""
        hint = f"rl:{link.id}" if link else f"dl:{deep_link_in.id}"  # type: ignore[union-attr]
        login = _Login(request=None, platform_config=self.config())
        login.set_lti_message_hint(hint=hint)
        return login.prepare_preflight_url(person.sub)

    # --- the HTTP side --------------------------------------------------------------------

    def _app(self) -> Starlette:
        return Starlette(
            routes=[
                Route(self.paths["auth"], self._auth, methods=["GET", "POST"]),
                Route(self.paths["token"], self._token, methods=["POST"]),
                Route(self.paths["jwks"], self._jwks, methods=["GET"]),
                Route("/nrps/{course}", self._memberships, methods=["GET"]),
                Route("/ags/{course}/lineitems", self._lineitems, methods=["GET", "POST"]),
                Route("/ags/{course}/lineitems/{item}", self._lineitem, methods=["GET"]),
                Route("/ags/{course}/lineitems/{item}/scores", self._scores, methods=["POST"]),
                Route("/deep-link-return/{course}", self._deep_link_return, methods=["POST"]),
            ]
        )

    async def _jwks(self, request: Request) -> Response:
        self.jwks_fetches += 1
        return JSONResponse({"keys": self.registration().get_jwks()})

    async def _auth(self, request: Request) -> Response:
        """The OIDC authorization endpoint: the tool's request comes back as a signed launch."""
        params = dict(request.query_params)
        if request.method == "POST":
            params.update({k: str(v) for k, v in (await request.form()).items()})
        errors = []
        if params.get("redirect_uri") != f"{self.tool_base}/lti/launch":
            errors.append(f"redirect_uri {params.get('redirect_uri')!r} is not registered")
        if params.get("client_id") != self.client_id:
            errors.append("unknown client_id")
        if params.get("response_type") != "id_token" or params.get("scope") != "openid":
            errors.append("response_type must be id_token and scope openid")
        person = self.people.get(params.get("login_hint", ""))
        if person is None:
            errors.append("unknown login_hint")
        if errors:
            return JSONResponse({"error": "invalid_request", "errors": errors}, status_code=400)
        assert person is not None
        config = self.config()
        launch = _Launch(params, config)
        launch.set_id_token_expiration(self.expires_in)
        kind, _, ident = params.get("lti_message_hint", "").partition(":")
        course = self.courses[self.links[ident].course_id if kind == "rl" else ident]
        launch.set_user_data(
            person.sub, course.roles_of(person), full_name=person.name, email_address=person.email
        )
        if kind == "rl":
            link = self.links[ident]
            launch.set_resource_link_claim(link.id, title=link.title)
            if link.custom:
                launch.set_custom_parameters_claim(dict(link.custom))
            lineitem = self._item_url(course, link.line_item_id) if link.line_item_id else None
        else:
            launch.set_dl(
                f"{self.base}/deep-link-return/{course.id}",
                title="Add a lab",
                accept_types={"ltiResourceLink"},
            )
            lineitem = None
        launch.set_launch_context_claim(
            course.id, context_title=course.title, context_label=course.title
        )
        launch.set_ags(
            lineitems_url=f"{self.base}/ags/{course.id}/lineitems",
            lineitem_url=lineitem,
            allow_creating_lineitems=True,
        )
        launch.set_nrps(f"{self.base}/nrps/{course.id}")
        if self.tamper is not None:
            launch.set_extra_claims(self.tamper())
        data = launch.lti_launch()
        fields = "".join(
            f'<input type="hidden" name="{name}" value="{html.escape(str(data[name]))}">'
            for name in ("id_token", "state")
        )
        return HTMLResponse(
            f'<form id="launch" method="post" action="{html.escape(data["launch_url"])}">{fields}'
            '</form><script>document.getElementById("launch").submit()</script>'
        )

    async def _token(self, request: Request) -> Response:
        form = {k: str(v) for k, v in (await request.form()).items()}
        self.assertions.append(form.get("client_assertion", ""))
        aud = jwt.decode(form.get("client_assertion", ""), options={"verify_signature": False}).get(
            "aud"
        )
        self.token_audiences.append(str(aud))
        if aud != (self.token_audience or self.url("token")):
            return JSONResponse(
                {"error": "invalid_client", "error_description": f"aud {aud}"}, status_code=400
            )
        try:
            return JSONResponse(self.config().get_access_token(form))
        except Exception as exc:
            return JSONResponse(
                {"error": "invalid_client", "error_description": str(exc)}, status_code=400
            )

    def _allowed(self, request: Request, scopes: list[str]) -> bool:
        scheme, _, token = request.headers.get("authorization", "").partition(" ")
        if scheme.lower() != "bearer" or not token:
            return False
        try:
            return self.config().validate_token(token, allowed_scopes=scopes)
        except Exception:
            return False

    async def _memberships(self, request: Request) -> Response:
        if not self._allowed(request, [NRPS_SCOPE]):
            return JSONResponse({"error": "unauthorized"}, status_code=401)
        if self.roster_failure is not None:
            status, text = self.roster_failure
            return Response(text, status_code=status, media_type="text/plain")
        course = self.courses[request.path_params["course"]]
        page = int(request.query_params.get("page", "1"))
        size = self.nrps_page_size
        chosen = course.members[(page - 1) * size : page * size]
        members = [
            {
                "user_id": p.sub,
                "name": p.name,
                "email": p.email,
                "roles": course.roles_of(p),
                "status": p.status,
            }
            for p in (self.people[s] for s in chosen)
        ]
        headers = {}
        if page * size < len(course.members):
            headers["Link"] = f'<{self.base}/nrps/{course.id}?page={page + 1}>; rel="next"'
        body = {
            "id": str(request.url),
            "context": {"id": course.id, "title": course.title},
            "members": members,
        }
        return JSONResponse(
            body,
            headers=headers,
            media_type="application/vnd.ims.lti-nrps.v2.membershipcontainer+json",
        )

    def _item_url(self, course: Course, item_id: str) -> str:
        return f"{self.base}/ags/{course.id}/lineitems/{item_id}"

    def _item_json(self, course: Course, item: LineItem) -> dict[str, Any]:
        body: dict[str, Any] = {
            "id": self._item_url(course, item.id),
            "label": item.label,
            "scoreMaximum": item.score_maximum,
        }
        for key, value in (
            ("resourceId", item.resource_id),
            ("tag", item.tag),
            ("resourceLinkId", item.resource_link_id),
        ):
            if value:
                body[key] = value
        if item.end is not None:
            body["endDateTime"] = item.end.isoformat()
        return body

    def make_line_item(
        self,
        course: Course,
        *,
        label: str,
        score_maximum: float,
        resource_id: str = "",
        tag: str = "",
    ) -> LineItem:
        item = LineItem(
            id=secrets.token_hex(4),
            label=label,
            score_maximum=score_maximum,
            resource_id=resource_id,
            tag=tag,
        )
        course.line_items[item.id] = item
        return item

    async def _lineitems(self, request: Request) -> Response:
        course = self.courses[request.path_params["course"]]
        if request.method == "GET":
            if not self._allowed(
                request,
                [LINEITEM_SCOPE, "https://purl.imsglobal.org/spec/lti-ags/scope/lineitem.readonly"],
            ):
                return JSONResponse({"error": "unauthorized"}, status_code=401)
            wanted = request.query_params.get("resource_id")
            items = [
                self._item_json(course, i)
                for i in course.line_items.values()
                if not wanted or i.resource_id == wanted
            ]
            return JSONResponse(
                items, media_type="application/vnd.ims.lis.v2.lineitemcontainer+json"
            )
        if not self._allowed(request, [LINEITEM_SCOPE]):
            return JSONResponse({"error": "unauthorized"}, status_code=401)
        body = json.loads(await request.body())
        item = self.make_line_item(
            course,
            label=body["label"],
            score_maximum=float(body["scoreMaximum"]),
            resource_id=body.get("resourceId", ""),
            tag=body.get("tag", ""),
        )
        return JSONResponse(
            self._item_json(course, item),
            status_code=201,
            media_type="application/vnd.ims.lis.v2.lineitem+json",
        )

    async def _lineitem(self, request: Request) -> Response:
        course = self.courses[request.path_params["course"]]
        item = course.line_items[request.path_params["item"]]
        return JSONResponse(self._item_json(course, item))

    async def _scores(self, request: Request) -> Response:
        if not self._allowed(request, [SCORE_SCOPE]):
            return JSONResponse({"error": "unauthorized"}, status_code=401)
        course = self.courses[request.path_params["course"]]
        item = course.line_items.get(request.path_params["item"])
        if item is None:
            return JSONResponse(
                {"errors": [{"message": "The specified resource does not exist."}]}, status_code=404
            )
        if not course.published:
            # As Canvas answers a score for a course that is not published yet.
            return JSONResponse(
                {"errors": [{"message": "Course not available for student"}]}, status_code=422
            )
        score = json.loads(await request.body())
        item.received.append(score)
        if score.get("userId") not in course.members:
            return JSONResponse(
                {"errors": [{"message": "User not found in course or is not a student"}]},
                status_code=422,
            )
        given = float(score["scoreGiven"])
        submitted = (score.get(CANVAS_SUBMISSION) or {}).get("submitted_at")
        when = (
            datetime.fromisoformat(submitted.replace("Z", "+00:00"))
            if submitted
            else datetime.now(UTC)
        )
        if item.end is not None and when > item.end:
            given *= 1 - course.late_penalty  # Canvas's late policy, by the submission time
        item.grades[score["userId"]] = given
        if self.on_score is not None:
            self.on_score(score)
        return JSONResponse(
            {"resultUrl": f"{self._item_url(course, item.id)}/results/{score['userId']}"}
        )

    async def _deep_link_return(self, request: Request) -> Response:
        """Where the tool's deep-linking response lands: each resource link is placed, and a
        line item it asks for is made with it (as Canvas makes an assignment)."""
        course = self.courses[request.path_params["course"]]
        form = {k: str(v) for k, v in (await request.form()).items()}
        # lti1p3platform checks the signature (by the tool's key set) and the message; the
        # response must also be meant for this platform.
        aud = jwt.decode(form.get("JWT", ""), options={"verify_signature": False}).get("aud")
        if self.issuer not in (aud if isinstance(aud, list) else [aud]):
            return JSONResponse({"error": f"aud {aud} is not this platform"}, status_code=400)
        try:
            items = self.config().validate_deeplinking_resp(form)
        except Exception as exc:
            return JSONResponse({"error": str(exc)}, status_code=400)
        self.deep_link_results.append(items)
        for content in items:
            link = self.link(course, content.get("title", ""), content.get("custom") or {})
            asked = content.get("lineItem")
            if asked:
                item = self.make_line_item(
                    course,
                    label=asked.get("label", link.title),
                    score_maximum=float(asked["scoreMaximum"]),
                    resource_id=asked.get("resourceId", ""),
                    tag=asked.get("tag", ""),
                )
                item.resource_link_id = link.id
                link.line_item_id = item.id
        return HTMLResponse("<p>Placed.</p>")

    def __enter__(self) -> TestPlatform:
        self.server.__enter__()
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.__exit__(*exc)


_FIELD = re.compile(r'<input type="hidden" name="([^"]+)" value="([^"]*)"')
_ACTION = re.compile(r'<form[^>]* action="([^"]+)"')


def form_of(page: str) -> tuple[str, dict[str, str]]:
    """The auto-posting form of a page: where it posts, and its hidden fields."""
    action = _ACTION.search(page)
    assert action, page[:2000]
    return html.unescape(action.group(1)), {k: html.unescape(v) for k, v in _FIELD.findall(page)}


def query(url: str, **params: str) -> str:
    return url + ("&" if "?" in url else "?") + urlencode(params)
