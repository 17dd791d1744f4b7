"""Throw-away TLS certificates for tests, made by the ``openssl`` command (a test is skipped without it).

Every key is P-256 and every certificate lasts 2 days: long enough for a run, short enough to be
useless elsewhere. One self-signed pair serves a loopback HTTPS server; a CA with pairs it signed
covers what a self-signed one cannot (a client certificate, a name other than the address).
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

_EC_KEY = ("-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes")


def _openssl(*args: str, cwd: Path) -> None:
    if shutil.which("openssl") is None:
        pytest.skip("openssl is needed to make a test certificate")
    subprocess.run(["openssl", *args], cwd=cwd, check=True, capture_output=True, timeout=60)


def self_signed_pair(directory: Path, common_name: str = "localhost") -> tuple[Path, Path]:
    """``tls.crt`` (a self-signed certificate for 127.0.0.1) and ``tls.key`` in ``directory``."""
    directory.mkdir(parents=True, exist_ok=True)
    cert, key = directory / "tls.crt", directory / "tls.key"
    _openssl("req", "-x509", *_EC_KEY, "-days", "2", "-subj", f"/CN={common_name}",
             "-addext", "subjectAltName=IP:127.0.0.1", "-keyout", str(key), "-out", str(cert), cwd=directory)
    return cert, key


def certificate_authority(directory: Path, common_name: str = "test-ca") -> tuple[Path, Path]:
    """``ca.crt`` (a CA that may sign certificates) and ``ca.key`` in ``directory``."""
    directory.mkdir(parents=True, exist_ok=True)
    _openssl("req", "-x509", *_EC_KEY, "-keyout", "ca.key", "-out", "ca.crt", "-days", "2",
             "-subj", f"/CN={common_name}", "-addext", "basicConstraints=critical,CA:TRUE",
             "-addext", "keyUsage=critical,keyCertSign,cRLSign", cwd=directory)
    return directory / "ca.crt", directory / "ca.key"


def signed_pair(ca: tuple[Path, Path], name: str, common_name: str, extensions: dict[str, str]) -> tuple[Path, Path]:
    """``<name>.crt``, signed by ``ca`` (`certificate_authority`) with ``extensions``, and ``<name>.key``, beside it.

    Args:
        ca: the CA's certificate and key.
        name: the files' stem.
        common_name: the subject's CN (a client certificate's user name).
        extensions: X.509v3 extensions as openssl names them, e.g. ``{"extendedKeyUsage": "clientAuth"}``.
    """
    ca_cert, ca_key = ca
    directory = ca_cert.parent
    (directory / f"{name}.ext").write_text("".join(f"{field}={value}\n" for field, value in extensions.items()))
    _openssl("req", *_EC_KEY, "-keyout", f"{name}.key", "-out", f"{name}.csr", "-subj", f"/CN={common_name}",
             cwd=directory)
    _openssl("x509", "-req", "-in", f"{name}.csr", "-CA", str(ca_cert), "-CAkey", str(ca_key), "-CAcreateserial",
             "-out", f"{name}.crt", "-days", "2", "-extfile", f"{name}.ext", cwd=directory)
    return directory / f"{name}.crt", directory / f"{name}.key"
