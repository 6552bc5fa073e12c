"""The exporter's HTTP endpoints: /metrics, /healthz, /ready; optional TLS and basic auth.

Owns: the threaded HTTP server and its request handling. /healthz answers 200 while the process
serves; /ready answers 200 once the service reached the cluster, 503 before; /metrics serves what the
function app.py hands it renders (one offsets collection per scrape, shared by concurrent scrapes). A
connection that sends or reads nothing for web.connection_timeout_seconds is closed, so idle clients
cannot hold server threads.
Must not: log credentials or request headers (the basic-auth password joins the log redaction of
cluster/access/connection.py); collect anything itself.
"""
from __future__ import annotations

import base64
import hmac
import logging
import ssl
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Callable

from prometheus_client import CONTENT_TYPE_LATEST

from cluster.access.connection import LOG_SECRETS
from exporter.config import WebSection

log = logging.getLogger("txnlab.exporter.web")


def _check_auth(header: str | None, username: str, password: str) -> bool:
    if not header or not header.startswith("Basic "):
        return False
    try:
        user, _, given = base64.b64decode(header[6:]).decode().partition(":")
    except (ValueError, UnicodeDecodeError):
        return False
    return hmac.compare_digest(user.encode(), username.encode()) & hmac.compare_digest(given.encode(), password.encode())


def make_handler(metrics: Callable[[], bytes], ready: Callable[[], bool], web: WebSection) -> type:
    password = web.basic_auth_password.get_secret_value() if web.basic_auth_password else ""
    LOG_SECRETS.add(password)

    class Handler(BaseHTTPRequestHandler):
        server_version = "txnlab-exporter"
        timeout = web.connection_timeout_seconds  # socket timeout of each connection (StreamRequestHandler)

        def do_GET(self) -> None:  # noqa: N802 - http.server API
            if web.basic_auth and not _check_auth(self.headers.get("Authorization"), web.basic_auth_username or "",
                                                  password):
                self._reply(401, b"authentication required\n", extra={"WWW-Authenticate": 'Basic realm="txnlab"'})
            elif self.path.split("?")[0] == "/metrics":
                self._reply(200, metrics(), CONTENT_TYPE_LATEST)
            elif self.path == "/healthz":
                self._reply(200, b"ok\n")
            elif self.path == "/ready":
                self._reply(*((200, b"ready\n") if ready() else (503, b"not ready: cluster not reached yet\n")))
            else:
                self._reply(404, b"txnlab exporter: /metrics, /healthz, /ready\n")

        def _reply(self, code: int, body: bytes, content_type: str = "text/plain; charset=utf-8",
                   extra: dict[str, str] | None = None) -> None:
            self.send_response(code)
            self.send_header("Content-Type", content_type)
            self.send_header("Content-Length", str(len(body)))
            for key, value in (extra or {}).items():
                self.send_header(key, value)
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, fmt: str, *args: object) -> None:
            log.debug("%s %s", self.address_string(), fmt % args)

    return Handler


class _QuietServer(ThreadingHTTPServer):
    """A client that hangs up mid-request or mid-handshake (a port check, a TLS client that distrusts us)
    is logged at DEBUG, not as a traceback on stderr."""

    def handle_error(self, request, client_address) -> None:  # noqa: ANN001 - socketserver API
        exc = sys.exc_info()[1]
        if isinstance(exc, OSError):          # ssl.SSLError, ConnectionResetError, BrokenPipeError, timeouts
            log.debug("connection from %s ended: %s", client_address[0], exc)
        else:
            super().handle_error(request, client_address)


class MetricsServer:
    """A ThreadingHTTPServer on its own thread; close() stops it. `metrics`: the /metrics body (text format
    0.0.4)."""

    def __init__(self, metrics: Callable[[], bytes], ready: Callable[[], bool], web: WebSection):
        self.httpd = _QuietServer((web.listen_address, web.port), make_handler(metrics, ready, web))
        self.httpd.daemon_threads = True
        if web.basic_auth and not web.tls:
            log.warning("basic auth over plain HTTP: the password crosses the network readable; set "
                        "web.tls_cert_file and web.tls_key_file")
        if web.tls and web.tls_cert_file:
            context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
            context.load_cert_chain(web.tls_cert_file, web.tls_key_file)
            # handshake in the handler thread, not in accept(): a silent client cannot stall the server
            self.httpd.socket = context.wrap_socket(self.httpd.socket, server_side=True,
                                                    do_handshake_on_connect=False)
        self.thread = threading.Thread(target=self.httpd.serve_forever, name="txnlab-exporter-http", daemon=True)

    @property
    def port(self) -> int:
        return self.httpd.server_address[1]

    def start(self) -> None:
        self.thread.start()

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()
