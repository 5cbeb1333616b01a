"""Fetch an untrusted URL into a Snapshot without letting it reach private networks.

Every hop (the URL and each redirect target) is vetted before any connection: http(s) only,
no credentials, and a host whose every address is global. The socket is then connected to
one of the vetted addresses rather than to the name, so a DNS answer that changes between
the check and the connect (rebinding) cannot steer the request elsewhere; the original name
still goes into the Host header and into TLS SNI and certificate checks.
"""

from __future__ import annotations

import contextlib
import hashlib
import http.client
import ipaddress
import socket
import ssl
import string
import threading
import time
from dataclasses import dataclass
from datetime import UTC, datetime
from email.message import Message
from urllib.parse import SplitResult, quote, urljoin, urlsplit

import idna

from tortus_pg.errors import InvalidInput
from tortus_pg.ingest.types import Limits

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address
SockAddr = tuple[str, int] | tuple[str, int, int, int]

ALLOW_HINT = "pass --allow-private-urls to allow private addresses"
_DEFAULT_LIMITS = Limits()
_REDIRECTS = frozenset({301, 302, 303, 307, 308})
_LOCAL_SUFFIXES = (".localhost", ".internal", ".local", ".home.arpa")
_SHARED = ipaddress.IPv4Network("100.64.0.0/10")
_NAT64 = ipaddress.IPv6Network("64:ff9b::/96")
_CHUNK = 64 * 1024


class FetchError(InvalidInput):
    """A URL could not be fetched."""


class UnsafeURL(FetchError):
    """A URL or redirect target was refused before connecting (scheme, credentials, address)."""


@dataclass(frozen=True)
class Snapshot:
    """The bytes of a URL as retrieved, with the response metadata worth keeping."""

    url: str
    final_url: str
    data: bytes
    content_type: str | None
    etag: str | None
    last_modified: str | None
    retrieved_at: datetime
    sha256: str
    redirects: tuple[str, ...]
    warnings: tuple[str, ...]


@dataclass(frozen=True)
class Validators:
    """What a stored copy of a URL was served with: its ETag and Last-Modified, sent back as
    If-None-Match and If-Modified-Since so an unchanged page answers 304 without its body."""

    etag: str | None = None
    last_modified: str | None = None

    def headers(self) -> dict[str, str]:
        return {name: value for name, value in (("If-None-Match", self.etag),
                                                ("If-Modified-Since", self.last_modified)) if value}


@dataclass(frozen=True)
class _Target:
    url: str
    scheme: str
    host: str
    port: int
    path: str
    addresses: tuple[tuple[socket.AddressFamily, SockAddr], ...]


def fetch_url(
    url: str,
    *,
    limits: Limits = _DEFAULT_LIMITS,
    allow_private: bool = False,
    allowed_hosts: frozenset[str] = frozenset(),
    max_redirects: int = 5,
    timeout_s: float = 20.0,
    user_agent: str = "tortus-pg/0.1",
    validators: Validators | None = None,
) -> Snapshot | None:
    """GET `url`, following at most `max_redirects` redirects, and return its bytes; None when
    `validators` (a stored copy's ETag and Last-Modified) are given and the server answers
    304 Not Modified.

    Private, loopback, link-local and other non-global addresses are refused unless
    `allow_private` is set; `allowed_hosts` holds 'host:port' entries ('[::1]:8080' for IPv6)
    exempt from that check. `timeout_s` bounds the whole fetch, redirects included. The body
    may not exceed `limits.max_response_bytes`. Raises UnsafeURL for refused URLs and
    FetchError for everything else that goes wrong.
    """
    if max_redirects < 0 or timeout_s <= 0:
        raise InvalidInput("max_redirects must be >= 0 and timeout_s > 0")
    allowed = frozenset(h.lower() for h in allowed_hosts)
    deadline = time.monotonic() + timeout_s
    current, what = url, url
    redirects: list[str] = []
    warnings: list[str] = []
    while True:
        target = _vet(current, what, allow_private=allow_private, allowed=allowed)
        status, reason, headers, data = _exchange(
            target, limits=limits, deadline=deadline, timeout_s=timeout_s, user_agent=user_agent,
            conditional=validators.headers() if validators is not None else {},
        )
        if status == 304 and validators is not None:
            return None
        if status in _REDIRECTS:
            location = headers.get("Location")
            if not location:
                raise FetchError(f"{current} answered HTTP {status} without a Location header")
            if len(redirects) >= max_redirects:
                raise FetchError(
                    f"too many redirects fetching {url} (more than {max_redirects}); "
                    "fetch the final URL directly or allow more redirects"
                )
            following = urljoin(current, location.strip())
            if target.scheme == "https" and following.lower().startswith("http:"):
                warnings.append(f"redirected from https to http at {following}")
            redirects.append(following)
            current, what = following, f"redirect to {following}"
            continue
        if not 200 <= status < 300:
            raise FetchError(f"{current} answered HTTP {status} {reason}; check the URL")
        return _snapshot(url, current, headers, data, redirects, warnings)


def _snapshot(url: str, final: str, headers: Message, data: bytes, redirects: list[str],
              warnings: list[str]) -> Snapshot:
    encoding = headers.get("Content-Encoding", "identity").strip().lower()
    if encoding not in ("", "identity"):
        warnings.append(f"{final} came with content-encoding {encoding}; kept as received")
    return Snapshot(
        url=url, final_url=final, data=data, content_type=headers.get("Content-Type"), etag=headers.get("ETag"),
        last_modified=headers.get("Last-Modified"), retrieved_at=datetime.now(UTC),
        sha256=hashlib.sha256(data).hexdigest(), redirects=tuple(redirects), warnings=tuple(warnings),
    )


def _vet(url: str, what: str, *, allow_private: bool, allowed: frozenset[str]) -> _Target:
    """Check one hop and resolve it to the addresses it may connect to."""
    if any(c < " " or c == "\x7f" for c in url):
        raise UnsafeURL(f"refused {what!r}: the URL contains control characters")
    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError:
        raise UnsafeURL(f"refused {what}: malformed URL or invalid port") from None
    scheme = parts.scheme.lower()
    if scheme not in ("http", "https"):
        raise UnsafeURL(f"refused {what}: only http and https URLs can be fetched")
    if parts.username is not None or parts.password is not None:
        raise UnsafeURL(f"refused {what}: URLs with a user name or password are not fetched")
    if port == 0:
        raise UnsafeURL(f"refused {what}: invalid port; use a port between 1 and 65535")
    port = port or (443 if scheme == "https" else 80)
    host = _host(parts, what)
    exempt = allow_private or _host_key(host, port) in allowed
    name = host.rstrip(".")
    if not exempt and (name == "localhost" or name.endswith(_LOCAL_SUFFIXES)):
        raise UnsafeURL(f"refused {what}: {host} is a local host name; {ALLOW_HINT}")
    literal = _literal_ip(host)
    if literal is not None and not exempt and (why := _non_global(literal)) is not None:
        raise UnsafeURL(f"refused {what}: {host} is {why}; {ALLOW_HINT}")
    addresses = _resolve(host, port, literal, what)
    if not exempt:
        for _, sockaddr in addresses:
            if (why := _non_global(ipaddress.ip_address(sockaddr[0]))) is not None:
                raise UnsafeURL(
                    f"refused {what}: {host} resolves to {sockaddr[0]}, {why}; {ALLOW_HINT}"
                )
    path = quote(parts.path or "/", safe=string.punctuation)
    if parts.query:
        path += "?" + quote(parts.query, safe=string.punctuation)
    return _Target(url, scheme, host, port, path, addresses)


def _host(parts: SplitResult, what: str) -> str:
    host = parts.hostname
    if not host:
        raise UnsafeURL(f"refused {what}: the URL has no host")
    if " " in host:
        raise UnsafeURL(f"refused {what}: invalid host name {host!r}")
    if host.isascii():
        return host
    try:  # IDNA 2008 with UTS 46 mapping, as browsers resolve: "faß.de" is xn--fa-hia.de, not fass.de
        return idna.encode(host, uts46=True).decode("ascii")
    except idna.IDNAError:
        raise UnsafeURL(f"refused {what}: invalid host name {host!r}") from None


def _host_key(host: str, port: int) -> str:
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


def _literal_ip(host: str) -> IPAddress | None:
    """The address a numeric host denotes, including legacy forms such as 2130706433."""
    try:
        return ipaddress.ip_address(host)
    except ValueError:
        pass
    if ":" in host or not host.replace(".", "").isalnum():
        return None
    try:
        return ipaddress.IPv4Address(socket.inet_aton(host))
    except OSError:
        return None


def _non_global(ip: IPAddress) -> str | None:
    """Why `ip` must not be fetched, or None when it is a public unicast address."""
    if isinstance(ip, ipaddress.IPv6Address):
        if ip.ipv4_mapped is not None:
            return _non_global(ip.ipv4_mapped)
        embedded = ip.sixtofour or (
            ipaddress.IPv4Address(int(ip) & 0xFFFFFFFF) if ip in _NAT64 else None
        )
        if embedded is not None and (why := _non_global(embedded)) is not None:
            return f"an address embedding {embedded}, {why}"
        if ip.is_site_local:
            return "a site-local address"
    if ip.is_loopback:
        return "a loopback address"
    if ip.is_link_local:
        return "a link-local address"
    if ip.is_multicast:
        return "a multicast address"
    if ip.is_unspecified:
        return "an unspecified address"
    if isinstance(ip, ipaddress.IPv4Address) and ip in _SHARED:
        return "a shared address (100.64.0.0/10)"
    if ip.is_private:
        return "a private address"
    if ip.is_reserved:
        return "a reserved address"
    if not ip.is_global:
        return "not a global address"
    return None


def _resolve(
    host: str, port: int, literal: IPAddress | None, what: str
) -> tuple[tuple[socket.AddressFamily, SockAddr], ...]:
    # A numeric host is passed canonically with AI_NUMERICHOST, so it never reaches DNS.
    lookup, flags = (str(literal), socket.AI_NUMERICHOST) if literal else (host, 0)
    try:
        infos = socket.getaddrinfo(lookup, port, type=socket.SOCK_STREAM, flags=flags)
    except (OSError, UnicodeError) as exc:
        raise FetchError(f"could not resolve {host} for {what}: {exc}; check the address") from None
    found: dict[tuple[socket.AddressFamily, SockAddr], None] = {}
    for family, _, _, _, sockaddr in infos:
        if family in (socket.AF_INET, socket.AF_INET6) and isinstance(sockaddr[0], str):
            found[(family, sockaddr)] = None
    if not found:
        raise FetchError(f"could not resolve {host} for {what}: no IP addresses")
    return tuple(found)


def _remaining(deadline: float) -> float:
    left = deadline - time.monotonic()
    if left <= 0:
        raise TimeoutError
    return left


def _connect(target: _Target, deadline: float, context: ssl.SSLContext | None) -> socket.socket:
    """A socket connected to the first reachable vetted address (never the name)."""
    error: OSError = OSError(f"no address of {target.host} could be reached")
    for family, sockaddr in target.addresses:
        sock = socket.socket(family, socket.SOCK_STREAM)
        try:
            sock.settimeout(_remaining(deadline))
            sock.connect(sockaddr)
        except OSError as exc:
            sock.close()
            error = exc
            if isinstance(exc, TimeoutError):
                break
            continue
        if context is None:
            return sock
        try:
            return context.wrap_socket(sock, server_hostname=target.host)
        except OSError:
            sock.close()
            raise
    raise error


def _exchange(
    target: _Target, *, limits: Limits, deadline: float, timeout_s: float, user_agent: str,
    conditional: dict[str, str],
) -> tuple[int, str, Message, bytes]:
    """One GET on one vetted hop (with the `conditional` headers of a stored copy); the body is
    read only for a 2xx answer."""
    conn: http.client.HTTPConnection
    try:
        if target.scheme == "https":
            context = ssl.create_default_context()
            sock = _connect(target, deadline, context)
            conn = http.client.HTTPSConnection(target.host, target.port, context=context)
        else:
            sock = _connect(target, deadline, None)
            conn = http.client.HTTPConnection(target.host, target.port)
        # The vetted socket is handed over and auto_open is off, so http.client never
        # resolves or connects on its own.
        conn.sock = sock
        conn.auto_open = 0
        # A read times out only when no byte comes; a server dripping bytes is stopped by
        # shutting the socket down at the deadline, whatever read is waiting then.
        watchdog = threading.Timer(_remaining(deadline), _cut, [sock])
        watchdog.start()
        try:
            sock.settimeout(_remaining(deadline))
            conn.request(
                "GET",
                target.path,
                headers={
                    "User-Agent": user_agent,
                    "Accept": "*/*",
                    "Accept-Encoding": "identity",
                    "Connection": "close",
                    **conditional,
                },
            )
            resp = conn.getresponse()
            data = b""
            if 200 <= resp.status < 300:
                data = _read_body(resp, target.url, limits.max_response_bytes, deadline)
            return resp.status, resp.reason, resp.headers, data
        except (OSError, http.client.HTTPException):
            if time.monotonic() >= deadline:
                raise TimeoutError from None
            raise
        finally:
            watchdog.cancel()
            conn.close()
    except TimeoutError:
        raise FetchError(
            f"timed out after {timeout_s:g}s fetching {target.url}; try again or raise the timeout"
        ) from None
    except ssl.SSLCertVerificationError as exc:
        raise FetchError(
            f"TLS certificate of {target.host} not accepted ({exc.verify_message})"
        ) from None
    except (OSError, http.client.HTTPException) as exc:
        raise FetchError(f"could not fetch {target.url}: {exc or type(exc).__name__}") from None


def _cut(sock: socket.socket) -> None:
    """End every read on `sock` now (the fetch's deadline has passed); a socket already closed
    has nothing waiting on it."""
    with contextlib.suppress(OSError):
        sock.shutdown(socket.SHUT_RDWR)


def _read_body(resp: http.client.HTTPResponse, url: str, limit: int, deadline: float) -> bytes:
    if resp.length is not None and resp.length > limit:
        raise FetchError(
            f"{url} is {resp.length} bytes, over the {limit}-byte limit; "
            "raise max_response_bytes to fetch it"
        )
    body = bytearray()
    while True:
        # One read at a time (read1), each checked against the deadline. The socket itself is
        # not touched here: a server closing after its body has closed it already.
        _remaining(deadline)
        chunk = resp.read1(min(_CHUNK, limit + 1 - len(body)))
        if not chunk:
            _remaining(deadline)  # an end cut by the deadline is a timeout, not the body's end
            if resp.length:
                raise FetchError(f"{url} closed the connection {resp.length} bytes before the end of its body")
            return bytes(body)
        body += chunk
        if len(body) > limit:
            raise FetchError(
                f"{url} sent more than {limit} bytes; raise max_response_bytes to fetch it"
            )
