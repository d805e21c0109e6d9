"""console.outbound: which addresses a tenant may send to, and how a send keeps to the address it
checked — one resolution, the connection pinned to it, TLS still checked against the name, no
proxy from the environment, and no more of an answer read than the cap."""

from __future__ import annotations

import datetime
import ipaddress
import socket
import ssl
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import requests
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

from console import outbound
from tests.support.http_listener import listening

HOOK_HOST = "hooks.tenant.example"
_real_getaddrinfo = socket.getaddrinfo


def fake_dns(monkeypatch: pytest.MonkeyPatch, answers: dict[str, list[list[str]]]) -> list[str]:
    """Resolve the names in `answers` to their next list of addresses (the last one repeats);
    every other name as the machine does. Returns the names asked, in order."""
    asked: list[str] = []

    def getaddrinfo(host: Any, port: Any, *args: Any, **kwargs: Any) -> Any:
        if host not in answers:
            return _real_getaddrinfo(host, port, *args, **kwargs)
        asked.append(host)
        addresses = answers[host][0] if len(answers[host]) == 1 else answers[host].pop(0)
        return [
            (
                socket.AF_INET6 if ":" in a else socket.AF_INET,
                socket.SOCK_STREAM,
                6,
                "",
                (a, int(port or 0)) if ":" not in a else (a, int(port or 0), 0, 0),
            )
            for a in addresses
        ]

    monkeypatch.setattr(socket, "getaddrinfo", getaddrinfo)
    return asked


# --- which addresses ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("address", "code"),
    [
        ("127.0.0.1", "loopback"),
        ("127.8.9.10", "loopback"),
        ("::1", "loopback"),
        ("0.0.0.0", "unspecified"),  # noqa: S104 (an address checked, not bound)
        ("::", "unspecified"),
        ("10.0.0.8", "private"),
        ("172.16.5.4", "private"),
        ("192.168.1.1", "private"),
        ("fc00::5", "private"),
        ("169.254.0.9", "link_local"),
        ("fe80::1", "link_local"),
        ("224.0.0.251", "multicast"),
        ("ff02::1", "multicast"),
        ("240.0.0.1", "private"),  # Python files 240/4 under private as well as reserved
        ("100.64.0.1", "not_global"),  # carrier-grade NAT
        ("192.0.2.7", "private"),  # documentation
        ("169.254.169.254", "metadata"),
        ("fd00:ec2::254", "metadata"),
        ("100.100.100.200", "metadata"),
        ("168.63.129.16", "metadata"),  # Azure's wire server: a global address
        ("::ffff:127.0.0.1", "loopback"),  # IPv4-mapped
        ("::ffff:169.254.169.254", "metadata"),
        ("64:ff9b::a9fe:a9fe", "metadata"),  # NAT64 of 169.254.169.254
        ("2002:7f00:1::", "loopback"),  # 6to4 of 127.0.0.1
        ("93.184.216.34", None),
        ("2606:2800:220:1:248:1893:25c8:1946", None),
    ],
)
def test_address_refusal_names_why_an_address_is_refused(address: str, code: str | None) -> None:
    assert outbound.address_refusal(ipaddress.ip_address(address)) == code


@pytest.mark.parametrize(
    ("url", "code"),
    [
        ("http://93.184.216.34/hook", "scheme"),
        ("ftp://93.184.216.34/hook", "scheme"),
        ("https:///hook", "invalid"),
        ("https://127.0.0.1/hook", "loopback"),
        ("https://127.1/hook", "loopback"),  # inet_aton's short form, as the resolver reads it
        ("https://2130706433/hook", "loopback"),  # 127.0.0.1 as one number
        ("https://localhost/hook", "loopback"),
        ("https://[::ffff:a9fe:a9fe]/latest/meta-data/", "metadata"),
    ],
)
def test_destination_check_refuses(url: str, code: str) -> None:
    with pytest.raises(outbound.DestinationRefused) as refused:
        outbound.destination_check(url)
    assert refused.value.code == code


def test_plain_http_is_allowed_only_where_the_settings_say(settings: Any) -> None:
    settings.DEBUG = False
    settings.SEAM_WEBHOOK_ALLOW_HTTP = False
    with pytest.raises(outbound.DestinationRefused):
        outbound.destination_check("http://93.184.216.34/hook")

    settings.SEAM_WEBHOOK_ALLOW_HTTP = True
    outbound.destination_check("http://93.184.216.34/hook")


def test_every_address_a_name_gives_must_pass(monkeypatch: pytest.MonkeyPatch) -> None:
    fake_dns(monkeypatch, {HOOK_HOST: [["93.184.216.34", "10.0.0.5"]]})

    with pytest.raises(outbound.DestinationRefused) as refused:
        outbound.destination_check(f"https://{HOOK_HOST}/hook")

    assert refused.value.code == "private"


def test_an_allowed_host_opens_its_addresses_but_never_the_metadata_endpoint(
    settings: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    settings.SEAM_WEBHOOK_ALLOWED_HOSTS = ["chat.internal"]
    fake_dns(monkeypatch, {"chat.internal": [["10.20.0.7"]], "meta.internal": [["169.254.169.254"]]})
    outbound.destination_check("https://chat.internal/hooks/1")

    settings.SEAM_WEBHOOK_ALLOWED_HOSTS = ["meta.internal"]
    with pytest.raises(outbound.DestinationRefused) as refused:
        outbound.destination_check("https://meta.internal/latest/meta-data/")
    assert refused.value.code == "metadata"


# --- sending ------------------------------------------------------------------------------------


def test_a_send_resolves_once_and_connects_to_the_address_it_checked(
    settings: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    settings.SEAM_WEBHOOK_ALLOW_HTTP = True
    settings.SEAM_WEBHOOK_ALLOWED_NETWORKS = ["127.0.0.1/32"]
    # The name answers the allowed address once, then an address nothing listens on: were it
    # asked again between the check and the connection, the send would fail.
    asked = fake_dns(monkeypatch, {HOOK_HOST: [["127.0.0.1"], ["192.0.2.1"]]})
    with listening() as listener:
        url = f"http://{HOOK_HOST}:{listener.port}/hook?token=s3cret"

        answer = outbound.post_json(url, {"text": "hello"}, timeout=5)

    assert answer.status == 200
    assert asked == [HOOK_HOST]
    [hit] = listener.hits
    assert (hit["method"], hit["path"]) == ("POST", "/hook?token=s3cret")
    assert hit["headers"]["Host"] == f"{HOOK_HOST}:{listener.port}"
    assert listener.json() == {"text": "hello"}


def test_proxies_from_the_environment_are_not_used(settings: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    settings.SEAM_WEBHOOK_ALLOW_HTTP = True
    settings.SEAM_WEBHOOK_ALLOWED_NETWORKS = ["127.0.0.1/32"]
    # A proxy would get the request (and could forward it anywhere); nothing listens on port 9.
    for name in ("HTTP_PROXY", "http_proxy", "HTTPS_PROXY", "https_proxy", "ALL_PROXY"):
        monkeypatch.setenv(name, "http://127.0.0.1:9")
    monkeypatch.delenv("NO_PROXY", raising=False)
    monkeypatch.delenv("no_proxy", raising=False)
    with listening() as listener:
        answer = outbound.post_json(listener.url, {}, timeout=5)

    assert answer.status == 200 and len(listener.hits) == 1


def test_no_more_of_an_answer_is_read_than_the_cap(settings: Any) -> None:
    settings.SEAM_WEBHOOK_ALLOW_HTTP = True
    settings.SEAM_WEBHOOK_ALLOWED_NETWORKS = ["127.0.0.1/32"]
    settings.SEAM_WEBHOOK_MAX_RESPONSE_BYTES = 1000
    with listening() as listener:
        listener.body = b"x" * 5_000_000

        answer = outbound.post_json(listener.url, {}, timeout=5)

    assert answer.status == 200
    assert answer.body == b"x" * 1000


# --- TLS to the checked address, verified against the name --------------------------------------


def _ca_key_usage() -> x509.KeyUsage:
    return x509.KeyUsage(
        digital_signature=False,
        content_commitment=False,
        key_encipherment=False,
        data_encipherment=False,
        key_agreement=False,
        key_cert_sign=True,
        crl_sign=True,
        encipher_only=False,
        decipher_only=False,
    )


def _certificate_authority(tmp_path: Path) -> Callable[[str], ssl.SSLContext]:
    """A CA trusted by outbound for the test (its file at tmp_path/ca.pem), and a maker of
    server contexts whose certificate names one host, signed by it."""
    now = datetime.datetime.now(datetime.UTC)
    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca_name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "Seam test CA")])
    ca = (
        x509.CertificateBuilder()
        .subject_name(ca_name)
        .issuer_name(ca_name)
        .public_key(ca_key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(days=1))
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .add_extension(_ca_key_usage(), critical=True)
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(ca_key.public_key()), critical=False)
        .sign(ca_key, hashes.SHA256())
    )
    (tmp_path / "ca.pem").write_bytes(ca.public_bytes(serialization.Encoding.PEM))

    def server_context(host: str) -> ssl.SSLContext:
        key = ec.generate_private_key(ec.SECP256R1())
        cert = (
            x509.CertificateBuilder()
            .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, host)]))
            .issuer_name(ca_name)
            .public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(days=1))
            .not_valid_after(now + datetime.timedelta(days=1))
            .add_extension(x509.SubjectAlternativeName([x509.DNSName(host)]), critical=False)
            .add_extension(
                x509.AuthorityKeyIdentifier.from_issuer_public_key(ca_key.public_key()), critical=False
            )
            .sign(ca_key, hashes.SHA256())
        )
        (tmp_path / f"{host}.pem").write_bytes(
            cert.public_bytes(serialization.Encoding.PEM)
            + key.private_bytes(
                serialization.Encoding.PEM,
                serialization.PrivateFormat.PKCS8,
                serialization.NoEncryption(),
            )
        )
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        context.load_cert_chain(tmp_path / f"{host}.pem")
        return context

    return server_context


@pytest.fixture
def tls_for(
    tmp_path: Path, settings: Any, monkeypatch: pytest.MonkeyPatch
) -> Callable[[str], ssl.SSLContext]:
    settings.SEAM_WEBHOOK_ALLOWED_NETWORKS = ["127.0.0.1/32"]
    maker = _certificate_authority(tmp_path)
    monkeypatch.setattr(outbound, "VERIFY", str(tmp_path / "ca.pem"))
    fake_dns(monkeypatch, {HOOK_HOST: [["127.0.0.1"]]})
    return maker


def test_tls_to_the_pinned_address_speaks_and_checks_the_host_name(
    tls_for: Callable[[str], ssl.SSLContext],
) -> None:
    with listening(tls=tls_for(HOOK_HOST)) as listener:
        answer = outbound.post_json(f"https://{HOOK_HOST}:{listener.port}/hook", {"a": 1}, timeout=5)

    assert answer.status == 200
    assert listener.server_names == [HOOK_HOST]
    assert listener.hits[0]["headers"]["Host"] == f"{HOOK_HOST}:{listener.port}"


def test_tls_refuses_a_certificate_for_another_name(tls_for: Callable[[str], ssl.SSLContext]) -> None:
    with (
        listening(tls=tls_for("elsewhere.example")) as listener,
        pytest.raises(requests.exceptions.SSLError),
    ):
        outbound.post_json(f"https://{HOOK_HOST}:{listener.port}/hook", {"a": 1}, timeout=5)

    assert listener.hits == []
