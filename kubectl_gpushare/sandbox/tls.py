"""HTTPS for the sandbox: a throwaway CA and a 127.0.0.1 server certificate, made at start.

kubectl sends bearer tokens only over HTTPS, so ``--auth`` needs this to be usable with the real
kubectl. The CA goes into the kubeconfig (``certificate-authority-data``); nothing is written to
disk except for the moment ``ssl`` needs files to load the key pair (a private temporary directory,
removed at once). Needs the ``cryptography`` package (the ``https`` extra).
"""

from __future__ import annotations

import datetime
import ipaddress
import ssl
import tempfile
from dataclasses import dataclass
from pathlib import Path


class TlsUnavailableError(RuntimeError):
    """The ``cryptography`` package is not installed."""


@dataclass(frozen=True)
class ServerTls:
    """A CA certificate (PEM) and the server context whose certificate it signed."""

    ca_pem: bytes
    context: ssl.SSLContext


def make_server_tls(valid_days: int = 365) -> ServerTls:
    """Generate a CA and a server certificate for ``127.0.0.1`` and ``localhost`` (EC P-256).

    Raises:
        TlsUnavailableError: ``cryptography`` is missing.
    """
    try:
        from cryptography import x509
        from cryptography.hazmat.primitives import hashes, serialization
        from cryptography.hazmat.primitives.asymmetric import ec
        from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID
    except ImportError:
        raise TlsUnavailableError(
            "HTTPS needs the 'cryptography' package: pip install 'kubectl-gpushare[https]'"
        ) from None
    now = datetime.datetime.now(datetime.UTC)
    start, end = now - datetime.timedelta(minutes=5), now + datetime.timedelta(days=valid_days)
    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca_name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "kubectl-gpushare sandbox CA")])
    ca = (
        x509.CertificateBuilder()
        .subject_name(ca_name)
        .issuer_name(ca_name)
        .public_key(ca_key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(start)
        .not_valid_after(end)
        .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
        .add_extension(x509.KeyUsage(False, False, False, False, False, True, True, False, False), critical=True)
        .sign(ca_key, hashes.SHA256())
    )
    key = ec.generate_private_key(ec.SECP256R1())
    cert = (
        x509.CertificateBuilder()
        .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "127.0.0.1")]))
        .issuer_name(ca_name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(start)
        .not_valid_after(end)
        .add_extension(
            x509.SubjectAlternativeName([x509.IPAddress(ipaddress.ip_address("127.0.0.1")), x509.DNSName("localhost")]),
            critical=False,
        )
        .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
        .sign(ca_key, hashes.SHA256())
    )
    pem = serialization.Encoding.PEM
    key_pem = key.private_bytes(pem, serialization.PrivateFormat.PKCS8, serialization.NoEncryption())
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.minimum_version = ssl.TLSVersion.TLSv1_2
    context.set_alpn_protocols(["http/1.1"])
    with tempfile.TemporaryDirectory(prefix="gpushare-sandbox-tls-") as folder:
        chain, secret = Path(folder) / "tls.crt", Path(folder) / "tls.key"
        chain.write_bytes(cert.public_bytes(pem))
        secret.touch(mode=0o600)
        secret.write_bytes(key_pem)
        context.load_cert_chain(chain, secret)
    return ServerTls(ca.public_bytes(pem), context)
