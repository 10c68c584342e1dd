"""A SAML 2.0 identity provider on loopback: pysaml2's own IdP (`saml2.server.Server`) behind
a small Starlette app. It answers the service provider's authentication request (HTTP-Redirect)
with a signed assertion posted back (HTTP-POST), for whoever the test says is signed in."""

from __future__ import annotations

import datetime as dt
import html.parser
import shutil
import tempfile
from pathlib import Path
from typing import Any

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import rsa
from cryptography.x509.oid import NameOID
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import HTMLResponse, Response
from starlette.routing import Route

from tests.app.lti.platform import ServerThread, free_port

PASSWORD_CLASS = "urn:oasis:names:tc:SAML:2.0:ac:classes:Password"


def self_signed(folder: Path) -> tuple[Path, Path]:
    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "test idp")])
    now = dt.datetime.now(dt.UTC)
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - dt.timedelta(days=1))
        .not_valid_after(now + dt.timedelta(days=30))
        .sign(key, hashes.SHA256())
    )
    key_path, cert_path = folder / "idp.key", folder / "idp.crt"
    key_path.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.TraditionalOpenSSL,
            serialization.NoEncryption(),
        )
    )
    cert_path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    return key_path, cert_path


class TestIdp:
    __test__ = False

    def __init__(self) -> None:
        self.port = free_port()
        self.base = f"http://127.0.0.1:{self.port}"
        self.folder = Path(tempfile.mkdtemp(prefix="kg-test-idp-"))
        self.key, self.cert = self_signed(self.folder)
        # Who is signed in at the identity provider, and what it releases about them.
        self.user_id = ""
        self.attributes: dict[str, list[str]] = {}
        # Whether the assertion is signed (a test turns it off to send an unsigned one).
        self.sign_assertion = True
        self.server_thread = ServerThread(
            Starlette(
                routes=[
                    Route("/sso/redirect", self._sso),
                    Route("/idp.xml", self._metadata),
                ]
            ),
            port=self.port,
        )
        self._server: Any = None

    def _config(self, sp_metadata: str | None) -> Any:
        from saml2 import BINDING_HTTP_REDIRECT
        from saml2.config import IdPConfig
        from saml2.saml import NAME_FORMAT_URI, NAMEID_FORMAT_PERSISTENT

        config = IdPConfig()
        config.load(
            {
                "entityid": f"{self.base}/idp.xml",
                "xmlsec_binary": shutil.which("xmlsec1"),
                "key_file": str(self.key),
                "cert_file": str(self.cert),
                "metadata": {"inline": [sp_metadata]} if sp_metadata else {},
                "service": {
                    "idp": {
                        "endpoints": {
                            "single_sign_on_service": [
                                (f"{self.base}/sso/redirect", BINDING_HTTP_REDIRECT)
                            ]
                        },
                        "name_id_format": [NAMEID_FORMAT_PERSISTENT],
                        "policy": {
                            "default": {
                                "lifetime": {"minutes": 15},
                                "attribute_restrictions": None,
                                "name_form": NAME_FORMAT_URI,
                            }
                        },
                    }
                },
            }
        )
        return config

    def metadata(self) -> str:
        """The IdP's metadata, as an institution hands it to a service provider."""
        from saml2.metadata import create_metadata_string

        return create_metadata_string(None, config=self._config(None), valid=24).decode()

    def trust(self, sp_metadata: str) -> None:
        """Load the service provider's metadata (read from kernelgrader's metadata URL)."""
        from saml2.server import Server

        self._server = Server(config=self._config(sp_metadata))

    async def _metadata(self, request: Request) -> Response:
        """The metadata at its URL, for a provider set up with the URL instead of the file."""
        return Response(self.metadata(), media_type="application/samlmetadata+xml")

    async def _sso(self, request: Request) -> Response:
        from saml2 import BINDING_HTTP_POST, BINDING_HTTP_REDIRECT
        from saml2.saml import NAMEID_FORMAT_PERSISTENT, NameID

        server = self._server
        parsed = server.parse_authn_request(
            request.query_params["SAMLRequest"], BINDING_HTTP_REDIRECT
        )
        args = server.response_args(parsed.message, [BINDING_HTTP_POST])
        answer = server.create_authn_response(
            self.attributes,
            userid=self.user_id,
            name_id=NameID(format=NAMEID_FORMAT_PERSISTENT, text=self.user_id),
            authn={"class_ref": PASSWORD_CLASS},
            sign_assertion=self.sign_assertion,
            **{k: v for k, v in args.items() if k != "binding"},
        )
        http = server.apply_binding(
            BINDING_HTTP_POST,
            str(answer),
            args["destination"],
            request.query_params.get("RelayState", ""),
            response=True,
        )
        return HTMLResponse(http["data"])

    def __enter__(self) -> TestIdp:
        self.server_thread.__enter__()
        return self

    def __exit__(self, *exc: object) -> None:
        self.server_thread.__exit__(*exc)


class FormReader(html.parser.HTMLParser):
    """The action and the fields of the first form in a page."""

    def __init__(self) -> None:
        super().__init__()
        self.action = ""
        self.fields: dict[str, str] = {}

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        values = {k: v or "" for k, v in attrs}
        if tag == "form" and not self.action:
            self.action = values.get("action", "")
        if tag == "input" and values.get("name"):
            self.fields[values["name"]] = values.get("value", "")


def read_form(page: str) -> tuple[str, dict[str, str]]:
    reader = FormReader()
    reader.feed(page)
    assert reader.action, page[:2000]
    return reader.action, reader.fields
