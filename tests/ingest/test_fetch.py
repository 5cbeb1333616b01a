"""fetch_url against real HTTP servers on 127.0.0.1; refusals are checked to happen offline."""

from __future__ import annotations

import gzip
import hashlib
import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import urlsplit

import pytest

from tortus_pg import migrate
from tortus_pg.db import connect, tenant_scope
from tortus_pg.embed import HashEmbedder
from tortus_pg.ingest import pipeline, sources
from tortus_pg.ingest.fetch import FetchError, UnsafeURL, Validators, _host, fetch_url
from tortus_pg.ingest.types import Limits
from tortus_pg.tenants import create_tenant

Route = Callable[[BaseHTTPRequestHandler], None]

# Audit hooks cannot be removed, so this one only records while a test asks it to, and only
# events raised by that test's own thread.
_recording: dict[int, list[str]] = {}


def _audit(event: str, args: tuple[object, ...]) -> None:
    events = _recording.get(threading.get_ident())
    if events is not None and event in ("socket.getaddrinfo", "socket.connect"):
        events.append(event)


sys.addaudithook(_audit)


@contextmanager
def network_events() -> Iterator[list[str]]:
    """Collect the socket lookups and connects made by the current thread."""
    events: list[str] = []
    _recording[threading.get_ident()] = events
    try:
        yield events
    finally:
        del _recording[threading.get_ident()]


class _Server(ThreadingHTTPServer):
    # Non-daemon handler threads, so server_close() joins every one of them.
    daemon_threads = False


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    routes: dict[str, Route] = {}
    seen: list[tuple[str, dict[str, str]]] = []

    def do_GET(self) -> None:
        self.seen.append((self.path, dict(self.headers.items())))
        route = self.routes.get(self.path)
        try:
            if route is None:
                send(self, 404, b"not found")
            else:
                route(self)
        except (BrokenPipeError, ConnectionResetError):
            self.close_connection = True

    def log_message(self, format: str, *args: object) -> None:
        pass


def send(
    h: BaseHTTPRequestHandler, status: int, body: bytes = b"", headers: dict[str, str] | None = None
) -> None:
    h.send_response(status)
    for name, value in (headers or {}).items():
        h.send_header(name, value)
    h.send_header("Content-Length", str(len(body)))
    h.end_headers()
    h.wfile.write(body)


def redirect(location: str, status: int = 302) -> Route:
    return lambda h: send(h, status, headers={"Location": location})


@dataclass
class Served:
    """One running server: its base URL, its routes (editable) and the requests it saw."""

    base: str
    routes: dict[str, Route]
    seen: list[tuple[str, dict[str, str]]]

    @property
    def paths(self) -> list[str]:
        return [path for path, _ in self.seen]


@dataclass
class Servers:
    """Starts test servers; `release` unblocks waiting handlers, at teardown at the latest."""

    release: threading.Event = field(default_factory=threading.Event)
    running: list[tuple[_Server, threading.Thread]] = field(default_factory=list)

    def start(self) -> Served:
        served = Served("", {}, [])
        handler = type("Handler", (_Handler,), {"routes": served.routes, "seen": served.seen})
        server = _Server(("127.0.0.1", 0), handler)
        thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05})
        thread.start()
        self.running.append((server, thread))
        served.base = f"http://127.0.0.1:{server.server_address[1]}"
        return served

    def wait(self) -> None:
        self.release.wait(5)


@pytest.fixture
def servers() -> Iterator[Servers]:
    made = Servers()
    yield made
    made.release.set()
    for server, thread in made.running:
        server.shutdown()
        server.server_close()
        thread.join()


def test_fetch_returns_bytes_and_metadata(servers: Servers) -> None:
    body = b"<html><title>t</title></html>"
    headers = {
        "Content-Type": "text/html; charset=utf-8",
        "ETag": '"v1"',
        "Last-Modified": "Wed, 21 Oct 2015 07:28:00 GMT",
    }
    srv = servers.start()
    srv.routes["/doc?x=1"] = lambda h: send(h, 200, body, headers)

    snap = fetch_url(f"{srv.base}/doc?x=1", allow_private=True, user_agent="probe/1")

    assert snap.data == body
    assert snap.sha256 == hashlib.sha256(body).hexdigest()
    assert snap.content_type == "text/html; charset=utf-8"
    assert snap.etag == '"v1"'
    assert snap.last_modified == "Wed, 21 Oct 2015 07:28:00 GMT"
    assert snap.url == snap.final_url == f"{srv.base}/doc?x=1"
    assert snap.redirects == () and snap.warnings == ()
    assert snap.retrieved_at.tzinfo == UTC
    sent = srv.seen[0][1]
    assert sent["Accept-Encoding"] == "identity"
    assert sent["User-Agent"] == "probe/1"
    assert sent["Host"] == srv.base.removeprefix("http://")


def test_non_ascii_path_is_percent_encoded(servers: Servers) -> None:
    srv = servers.start()
    srv.routes["/caf%C3%A9%20menu"] = lambda h: send(h, 200, b"ok")

    assert fetch_url(f"{srv.base}/café menu", allow_private=True).data == b"ok"


def test_allowed_host_connects_to_vetted_address_with_original_host_header(
    servers: Servers,
) -> None:
    srv = servers.start()
    port = srv.base.rsplit(":", 1)[1]
    srv.routes["/"] = lambda h: send(h, 200, h.headers["Host"].encode())

    snap = fetch_url(f"http://localhost:{port}/", allowed_hosts=frozenset({f"localhost:{port}"}))

    assert snap.data == f"localhost:{port}".encode()


def test_loopback_url_refused_before_connecting(servers: Servers) -> None:
    srv = servers.start()
    srv.routes["/x"] = lambda h: send(h, 200, b"secret")

    with network_events() as events, pytest.raises(UnsafeURL) as err:
        fetch_url(f"{srv.base}/x")

    assert str(err.value) == (
        f"refused {srv.base}/x: 127.0.0.1 is a loopback address; "
        "pass --allow-private-urls to allow private addresses"
    )
    assert events == [] and srv.seen == []


@pytest.mark.parametrize(
    "url",
    [
        "http://localhost:8000/",
        "http://LOCALHOST./",
        "http://api.localhost/",
        "http://metadata.google.internal/computeMetadata/v1/",
        "http://printer.local/",
    ],
)
def test_local_host_names_refused_without_lookup(url: str) -> None:
    with network_events() as events, pytest.raises(UnsafeURL, match="is a local host name"):
        fetch_url(url)
    assert events == []


@pytest.mark.parametrize(
    ("url", "reason"),
    [
        ("http://10.0.0.1/", "a private address"),
        ("http://192.168.1.1:8080/", "a private address"),
        ("http://169.254.169.254/latest/meta-data/", "a link-local address"),
        ("http://100.64.0.1/", "a shared address"),
        ("http://224.0.0.1/", "a multicast address"),
        ("http://0.0.0.0/", "an unspecified address"),
        ("http://240.0.0.1/", "a private address"),
        ("http://2130706433/", "a loopback address"),
        ("http://0x7f.1/", "a loopback address"),
        ("http://[::1]/", "a loopback address"),
        ("http://[::ffff:127.0.0.1]/", "a loopback address"),
        ("http://[::ffff:a9fe:a9fe]/", "a link-local address"),
        ("http://[fe80::1]/", "a link-local address"),
        ("http://[fc00::1]/", "a private address"),
        ("http://[64:ff9b::a00:1]/", "embedding 10.0.0.1"),
        ("http://[2002:7f00:1::]/", "embedding 127.0.0.1"),
    ],
)
def test_non_global_literals_refused_without_network(url: str, reason: str) -> None:
    with network_events() as events, pytest.raises(UnsafeURL, match=reason):
        fetch_url(url)
    assert events == []


@pytest.mark.parametrize(
    "url",
    ["http://user:pass@127.0.0.1/", "http://user@127.0.0.1/", "https://:pw@127.0.0.1/"],
)
def test_credentials_in_url_refused(url: str) -> None:
    with network_events() as events, pytest.raises(UnsafeURL, match="user name or password"):
        fetch_url(url, allow_private=True)
    assert events == []


@pytest.mark.parametrize(
    "url",
    ["file:///etc/passwd", "ftp://127.0.0.1/x", "gopher://127.0.0.1/", "data:,x", "//127.0.0.1/"],
)
def test_non_http_scheme_refused(url: str) -> None:
    with network_events() as events, pytest.raises(UnsafeURL, match="only http and https"):
        fetch_url(url, allow_private=True)
    assert events == []


@pytest.mark.parametrize(
    "url",
    ["http://127.0.0.1:0/", "http://127.0.0.1:99999/", "http://127.0.0.1:http/", "http:///x"],
)
def test_invalid_port_or_missing_host_refused(url: str) -> None:
    with network_events() as events, pytest.raises(UnsafeURL, match="port|no host"):
        fetch_url(url, allow_private=True)
    assert events == []


def test_control_characters_refused() -> None:
    with pytest.raises(UnsafeURL, match="control characters"):
        fetch_url("http://127.0.0.1/a\r\nHost: evil", allow_private=True)


def test_redirect_chain_followed_and_recorded(servers: Servers) -> None:
    srv = servers.start()
    srv.routes.update(
        {
            "/a": redirect("/b/c", 301),
            "/b/c": redirect("../d", 307),
            "/d": redirect(f"{srv.base}/e#frag", 308),
            "/e": lambda h: send(h, 200, b"done", {"Content-Type": "text/plain"}),
        }
    )

    snap = fetch_url(f"{srv.base}/a", allow_private=True, max_redirects=3)

    assert snap.data == b"done"
    assert snap.url == f"{srv.base}/a"
    assert snap.final_url == f"{srv.base}/e#frag"
    assert snap.redirects == (f"{srv.base}/b/c", f"{srv.base}/d", f"{srv.base}/e#frag")
    assert srv.paths == ["/a", "/b/c", "/d", "/e"]


def test_too_many_redirects_is_an_error(servers: Servers) -> None:
    srv = servers.start()
    srv.routes["/loop"] = redirect("/loop")

    with pytest.raises(FetchError, match="too many redirects"):
        fetch_url(f"{srv.base}/loop", allow_private=True, max_redirects=2)
    assert srv.paths == ["/loop"] * 3


def test_redirect_without_location_is_an_error(servers: Servers) -> None:
    srv = servers.start()
    srv.routes["/"] = lambda h: send(h, 302)

    with pytest.raises(FetchError, match="HTTP 302 without a Location"):
        fetch_url(f"{srv.base}/", allow_private=True)


@pytest.mark.parametrize("target", ["file:///etc/passwd", "ftp://127.0.0.1/x"])
def test_redirect_to_other_scheme_refused(servers: Servers, target: str) -> None:
    srv = servers.start()
    srv.routes["/"] = redirect(target)

    with pytest.raises(UnsafeURL, match=f"refused redirect to {target}: only http and https"):
        fetch_url(f"{srv.base}/", allow_private=True)


@pytest.mark.parametrize("target_host", ["127.0.0.2", "localhost", "[::1]"])
def test_redirect_to_loopback_refused_when_only_first_hop_allowed(
    servers: Servers, target_host: str
) -> None:
    srv = servers.start()
    port = srv.base.rsplit(":", 1)[1]
    target = f"http://{target_host}:{port}/inside"
    srv.routes["/"] = redirect(target)
    srv.routes["/inside"] = lambda h: send(h, 200, b"secret")

    with network_events() as events, pytest.raises(UnsafeURL) as err:
        fetch_url(f"{srv.base}/", allowed_hosts=frozenset({f"127.0.0.1:{port}"}))

    assert str(err.value).startswith(f"refused redirect to {target}: ")
    assert "--allow-private-urls" in str(err.value)
    assert srv.paths == ["/"]
    assert events.count("socket.connect") == 1


def test_streamed_body_over_limit_aborted_early(servers: Servers) -> None:
    def endless(h: BaseHTTPRequestHandler) -> None:
        h.send_response(200)
        h.send_header("Transfer-Encoding", "chunked")
        h.end_headers()
        for _ in range(3):
            h.wfile.write(b"190\r\n" + b"x" * 400 + b"\r\n")
        h.wfile.flush()
        servers.wait()  # never finishes the body: only an early abort ends the fetch quickly

    srv = servers.start()
    srv.routes["/big"] = endless
    started = time.monotonic()

    with pytest.raises(FetchError, match="sent more than 1000 bytes"):
        fetch_url(f"{srv.base}/big", allow_private=True, limits=Limits(max_response_bytes=1000))
    assert time.monotonic() - started < 2


def test_declared_length_over_limit_rejected_before_reading(servers: Servers) -> None:
    def huge(h: BaseHTTPRequestHandler) -> None:
        h.send_response(200)
        h.send_header("Content-Length", str(10**9))
        h.end_headers()
        h.wfile.flush()
        servers.wait()

    srv = servers.start()
    srv.routes["/huge"] = huge

    with pytest.raises(FetchError, match="is 1000000000 bytes, over the 1000-byte limit"):
        fetch_url(f"{srv.base}/huge", allow_private=True, limits=Limits(max_response_bytes=1000))


def test_body_exactly_at_limit_accepted(servers: Servers) -> None:
    srv = servers.start()
    srv.routes["/"] = lambda h: send(h, 200, b"y" * 1000)

    snap = fetch_url(f"{srv.base}/", allow_private=True, limits=Limits(max_response_bytes=1000))

    assert len(snap.data) == 1000


def test_error_status_reported(servers: Servers) -> None:
    srv = servers.start()

    with pytest.raises(FetchError, match="answered HTTP 404"):
        fetch_url(f"{srv.base}/missing", allow_private=True)


def test_slow_server_times_out(servers: Servers) -> None:
    srv = servers.start()
    srv.routes["/slow"] = lambda h: servers.wait()
    started = time.monotonic()

    with pytest.raises(FetchError, match="timed out after 0.3s"):
        fetch_url(f"{srv.base}/slow", allow_private=True, timeout_s=0.3)
    assert time.monotonic() - started < 1.5


def _drip(h: BaseHTTPRequestHandler, head: bool) -> None:
    """Two bytes every 0.1 s: of the status line and headers (`head`), or of a 400-byte body."""
    body = b"x" * 400
    message = b"HTTP/1.1 200 OK\r\nContent-Length: 400\r\n\r\n" + body
    start = 0 if head else len(message) - len(body)
    h.wfile.write(message[:start])
    h.wfile.flush()
    for i in range(start, len(message), 2):
        if servers_released.is_set():
            return
        h.wfile.write(message[i:i + 2])
        h.wfile.flush()
        time.sleep(0.1)


servers_released = threading.Event()


@pytest.mark.parametrize("head", [True, False], ids=["dripped headers", "dripped body"])
def test_a_server_dripping_bytes_is_cut_off_at_the_deadline(servers: Servers, head: bool) -> None:
    # Each read gets a byte in time, so only a deadline over the whole exchange stops it.
    srv = servers.start()
    srv.routes["/drip"] = lambda h: _drip(h, head)
    started = time.monotonic()
    try:
        with pytest.raises(FetchError, match="timed out after 1s"):
            fetch_url(f"{srv.base}/drip", allow_private=True, timeout_s=1)
    finally:
        servers_released.set()
    assert time.monotonic() - started < 2
    servers_released.clear()


def test_a_server_closing_after_its_body_is_read_in_full(servers: Servers) -> None:
    # HTTP/1.0 with Connection: close, as `python -m http.server` answers.
    srv = servers.start()

    def close_after(h: BaseHTTPRequestHandler) -> None:
        h.wfile.write(b"HTTP/1.0 200 OK\r\nContent-Type: text/plain\r\nContent-Length: 11\r\n"
                      b"Connection: close\r\n\r\nhello world")
        h.close_connection = True

    srv.routes["/close"] = close_after
    snap = fetch_url(f"{srv.base}/close", allow_private=True)
    assert snap.data == b"hello world"


def test_unexpected_content_encoding_kept_with_warning(servers: Servers) -> None:
    packed = gzip.compress(b"hello")
    srv = servers.start()
    srv.routes["/"] = lambda h: send(h, 200, packed, {"Content-Encoding": "gzip"})

    snap = fetch_url(f"{srv.base}/", allow_private=True)

    assert snap.data == packed
    assert snap.warnings == (f"{srv.base}/ came with content-encoding gzip; kept as received",)


def test_tls_failure_is_a_fetch_error(servers: Servers) -> None:
    srv = servers.start()
    https = srv.base.replace("http://", "https://")

    with pytest.raises(FetchError, match=f"could not fetch {https}/"):
        fetch_url(f"{https}/", allow_private=True, timeout_s=2)


def test_space_in_host_refused() -> None:
    with network_events() as events, pytest.raises(UnsafeURL, match="invalid host name"):
        fetch_url("http://127.0.0.1 x/", allow_private=True)
    assert events == []


def _validated(etag: str, body: bytes, modified: str = "Wed, 02 Dec 2026 10:00:00 GMT") -> Route:
    """A page that answers 304 to a request carrying its current ETag."""
    def route(h: BaseHTTPRequestHandler) -> None:
        if h.headers.get("If-None-Match") == etag:
            send(h, 304, headers={"ETag": etag})
        else:
            send(h, 200, body, {"ETag": etag, "Last-Modified": modified, "Content-Type": "text/html"})
    return route


def test_a_stored_copys_validators_make_an_unchanged_page_answer_304(servers: Servers) -> None:
    s = servers.start()
    s.routes["/page"] = _validated('"v1"', b"<html><body><p>first</p></body></html>")
    url = f"{s.base}/page"
    first = fetch_url(url, allow_private=True)
    assert first is not None and first.etag == '"v1"' and first.last_modified is not None
    assert fetch_url(url, allow_private=True, validators=Validators(first.etag, first.last_modified)) is None
    sent = s.seen[-1][1]
    assert sent["If-None-Match"] == '"v1"' and sent["If-Modified-Since"] == first.last_modified
    stale = fetch_url(url, allow_private=True, validators=Validators('"v0"', None))
    assert stale is not None and stale.data == first.data and "If-Modified-Since" not in s.seen[-1][1]
    assert "If-None-Match" not in s.seen[0][1]  # a first fetch asks unconditionally


def test_host_names_are_encoded_by_idna_2008() -> None:
    # IDNA 2003 (Python's codec) maps ß to ss, so faß.de would be fetched from fass.de.
    assert _host(urlsplit("http://faß.de/"), "it") == "xn--fa-hia.de"
    assert _host(urlsplit("http://Bücher.example/"), "it") == "xn--bcher-kva.example"
    with pytest.raises(UnsafeURL, match="invalid host name"):
        _host(urlsplit("http://a\u200db.example/"), "it")  # a joiner alone is not a valid label


def test_reingesting_an_unchanged_url_fetches_no_body_and_stores_nothing(
    servers: Servers, fresh_db: Callable[..., str],
) -> None:
    s = servers.start()
    page = "<html><body><h1>Ledger</h1><p>The Ledger Team is led by {}.</p></body></html>"
    s.routes["/doc"] = _validated('"a"', page.format("Ines").encode())
    url = fresh_db()
    migrate.upgrade(url)
    spec = sources.resolve([f"{s.base}/doc"], None)
    options = pipeline.IngestOptions(allow_private_urls=True)
    with connect(url) as conn:
        create_tenant(conn, "web")
        conn.commit()
        first = pipeline.ingest(conn, "web", spec, HashEmbedder(64), options)
        again = pipeline.ingest(conn, "web", spec, HashEmbedder(64), options)
        assert [r.status for r in first.results] == ["ingested"] and [r.status for r in again.results] == ["unchanged"]
        assert again.results[0].source_id == first.results[0].source_id and s.seen[-1][1]["If-None-Match"] == '"a"'
        s.routes["/doc"] = _validated('"b"', page.format("Tomas").encode())
        changed = pipeline.ingest(conn, "web", spec, HashEmbedder(64), options)
        assert [r.status for r in changed.results] == ["updated"]
        with tenant_scope(conn, "web") as scoped:
            assert scoped.execute("select etag from tortus.source").fetchone() == ('"b"',)
