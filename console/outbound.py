"""Outbound calls only where a tenant may send. A tenant's admin names a webhook's address; the
worker then POSTs to it from inside the operator's network, where a loopback port, a private
service or the cloud's metadata endpoint would answer. So an address is checked twice with the
same rules: when a rule is saved (`destination_check`, which tells the admin at once) and when it
is used (`post_json`), after resolving its name, because a name may point elsewhere by then.

The rules: https only (plain http too where `SEAM_WEBHOOK_ALLOW_HTTP` or `DEBUG`), and no
loopback, private, link-local, multicast, reserved, otherwise non-global or cloud-metadata
address, unless the operator allow-lists its network (`SEAM_WEBHOOK_ALLOWED_NETWORKS`) or its
host name (`SEAM_WEBHOOK_ALLOWED_HOSTS`, which never opens a metadata address). Sending resolves
the name once, checks every address it gave, and connects to the first one it checked, keeping
the name for the Host header, TLS's SNI and the certificate check: a name that answers
differently a moment later (DNS rebinding) is never asked again. Redirects are not followed, no
proxy from the environment is used, and at most `SEAM_WEBHOOK_MAX_RESPONSE_BYTES` of an answer
is read."""

from __future__ import annotations

import ipaddress
import socket
import time
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import requests
from django.conf import settings
from requests.adapters import HTTPAdapter

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address

# Cloud providers' instance-metadata and host endpoints. Most are link-local or private and
# refused anyway; Azure's wire server (168.63.129.16) is a global address and needs naming.
METADATA_ADDRESSES = frozenset(
    ipaddress.ip_address(a)
    for a in (
        "169.254.169.254",  # AWS, GCP, Azure, OpenStack, DigitalOcean
        "169.254.169.253",  # AWS DNS
        "169.254.169.123",  # AWS time
        "169.254.170.2",  # AWS ECS task metadata
        "fd00:ec2::254",  # AWS over IPv6
        "fd00:ec2::23",
        "100.100.100.200",  # Alibaba Cloud
        "192.0.0.192",  # Oracle Cloud
        "168.63.129.16",  # Azure wire server
    )
)
# NAT64's well-known prefix: the last 32 bits are an IPv4 address a gateway would reach.
_NAT64 = ipaddress.ip_network("64:ff9b::/96")

# TLS verification for the send path: requests' CA bundle. A module attribute so that a test
# can trust its own certificate authority.
VERIFY: bool | str = True


class DestinationRefused(Exception):
    """The address is not one a tenant may send to. `code` says why, in one word."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = code


class DestinationUnresolved(Exception):
    """The address's host name does not resolve (now): nothing was checked, nothing sent."""


@dataclass(frozen=True)
class Answer:
    """What a destination answered: its status and at most the allowed bytes of its body."""

    status: int
    body: bytes


@dataclass(frozen=True)
class _Target:
    scheme: str
    host: str  # ASCII (IDNA) and lower case; an IP address's text for a literal
    port: int
    url: str


def destination_check(url: str) -> None:
    """Raise DestinationRefused if `url` may not be sent to. A name that does not resolve now
    passes: sending checks again, and refuses whatever it then resolves to."""
    target = _target(url)
    try:
        addresses = _resolve(target)
    except DestinationUnresolved:
        return
    _check_addresses(target, addresses)


def post_json(url: str, payload: Any, *, timeout: float) -> Answer:
    """POST `payload` as JSON to `url` at an address checked as above, once, without following
    redirects. Raises DestinationRefused, DestinationUnresolved or requests' exceptions."""
    target = _target(url)
    addresses = _resolve(target)
    _check_addresses(target, addresses)
    pinned, host_header = _pinned_url(target, addresses[0])
    with requests.Session() as session:
        session.trust_env = False  # no proxy or CA bundle from the environment
        session.mount(f"{target.scheme}://", _PinnedAdapter(target.host))
        response = session.post(
            pinned,
            json=payload,
            # Identity: a compressed answer could unpack to far more than the cap allows.
            headers={"Host": host_header, "Accept-Encoding": "identity"},
            timeout=timeout,
            allow_redirects=False,
            stream=True,
            verify=VERIFY,
        )
        with response:
            body = _read_capped(response, settings.SEAM_WEBHOOK_MAX_RESPONSE_BYTES, timeout)
    return Answer(status=response.status_code, body=body)


def address_refusal(address: IPAddress) -> str | None:
    """Why a tenant may not send to this address (a code), or None. Ignores the allow-lists."""
    if address in METADATA_ADDRESSES:
        return "metadata"
    for embedded in _embedded_ipv4(address):
        why = address_refusal(embedded)
        if why:
            return why
    for code, refused in (
        ("unspecified", address.is_unspecified),
        ("loopback", address.is_loopback),
        ("link_local", address.is_link_local),
        ("multicast", address.is_multicast),
        ("private", address.is_private),
        ("reserved", address.is_reserved),
        ("not_global", not address.is_global),
    ):
        if refused:
            return code
    return None


# --- steps --------------------------------------------------------------------------------------


def _target(url: str) -> _Target:
    try:
        parts = urlsplit(url.strip())
        port = parts.port
        host = (parts.hostname or "").rstrip(".")
        host = host.encode("idna").decode("ascii").lower() if host else ""
    except (ValueError, UnicodeError) as exc:
        raise DestinationRefused("invalid", "the address is not a valid URL") from exc
    schemes = {"https", "http"} if settings.SEAM_WEBHOOK_ALLOW_HTTP or settings.DEBUG else {"https"}
    if parts.scheme.lower() not in schemes:
        raise DestinationRefused("scheme", "the address must start with https://")
    if not host:
        raise DestinationRefused("invalid", "the address names no host")
    scheme = parts.scheme.lower()
    return _Target(scheme, host, port or (443 if scheme == "https" else 80), url.strip())


def _resolve(target: _Target) -> list[IPAddress]:
    """The target's addresses, in the resolver's order of preference, each once."""
    try:
        return [ipaddress.ip_address(target.host)]
    except ValueError:
        pass
    try:
        infos = socket.getaddrinfo(target.host, target.port, type=socket.SOCK_STREAM)
    except (OSError, UnicodeError) as exc:
        raise DestinationUnresolved(type(exc).__name__) from exc
    addresses: list[IPAddress] = []
    for info in infos:
        address = ipaddress.ip_address(str(info[4][0]).partition("%")[0])
        if address not in addresses:
            addresses.append(address)
    if not addresses:
        raise DestinationUnresolved("no address")
    return addresses


def _check_addresses(target: _Target, addresses: list[IPAddress]) -> None:
    """Every address the name gave must pass, so that no answer among several slips through."""
    networks = [ipaddress.ip_network(n, strict=False) for n in settings.SEAM_WEBHOOK_ALLOWED_NETWORKS]
    host_allowed = target.host in {h.lower().rstrip(".") for h in settings.SEAM_WEBHOOK_ALLOWED_HOSTS}
    for address in addresses:
        if any(address.version == n.version and address in n for n in networks):
            continue
        why = address_refusal(address)
        if why is None or (host_allowed and why != "metadata"):
            continue
        shown = "a cloud metadata" if why == "metadata" else f"a {why.replace('_', '-')}"
        raise DestinationRefused(why, f"the address's host is {shown} address ({address})")


def _embedded_ipv4(address: IPAddress) -> list[ipaddress.IPv4Address]:
    """The IPv4 addresses an IPv6 address carries to (mapped, 6to4, Teredo, NAT64)."""
    if not isinstance(address, ipaddress.IPv6Address):
        return []
    found = [address.ipv4_mapped, address.sixtofour, address.teredo[1] if address.teredo else None]
    if address in _NAT64:
        found.append(ipaddress.IPv4Address(int(address) & 0xFFFFFFFF))
    return [a for a in found if a is not None]


def _pinned_url(target: _Target, address: IPAddress) -> tuple[str, str]:
    """The URL with its host replaced by the checked address, and the Host header to send."""
    parts = urlsplit(target.url)
    userinfo = parts.netloc.rpartition("@")[0]
    literal = f"[{address}]" if address.version == 6 else str(address)
    netloc = f"{userinfo}@" if userinfo else ""
    netloc += f"{literal}:{target.port}"
    shown_host = f"[{target.host}]" if ":" in target.host else target.host
    host_header = shown_host if parts.port is None else f"{shown_host}:{parts.port}"
    return urlunsplit((target.scheme, netloc, parts.path or "/", parts.query, "")), host_header


def _read_capped(response: requests.Response, limit: int, timeout: float) -> bytes:
    """At most `limit` bytes of the body, read for at most `timeout` seconds: the status is
    what counts, and a destination that streams without end must not hold the worker."""
    body = b""
    deadline = time.monotonic() + timeout
    for chunk in response.iter_content(chunk_size=8192):
        body += chunk
        if len(body) >= limit or time.monotonic() > deadline:
            break
    return body[:limit]


class _PinnedAdapter(HTTPAdapter):
    """Connects to the address in the URL, but speaks TLS to the host name: SNI and the
    certificate check use the name the tenant gave, not the address it resolved to."""

    def __init__(self, host: str) -> None:
        super().__init__(max_retries=0)
        self._host = host

    def build_connection_pool_key_attributes(
        self, request: requests.PreparedRequest, verify: Any, cert: Any = None
    ) -> Any:
        host_params, pool_kwargs = super().build_connection_pool_key_attributes(request, verify, cert)
        kwargs: dict[str, Any] = dict(pool_kwargs)
        if host_params["scheme"] == "https":
            kwargs["server_hostname"] = self._host
            kwargs["assert_hostname"] = self._host
        return host_params, kwargs
