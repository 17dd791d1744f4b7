"""The extender's HTTPS follows its certificate files: renewal without a restart, bad pairs refused.

Real TLS over loopback: a client checks which certificate the server presents, before and after
the files are swapped the way a Secret volume swaps them, while a keep-alive connection opened
before the swap keeps working.
"""

from __future__ import annotations

import http.client
import logging
import os
import shutil
import ssl
from pathlib import Path

import pytest
from certificates import self_signed_pair
from waiting import wait_for

from kubectl_gpushare.extender.certs import ReloadingKeyPair
from kubectl_gpushare.sandbox.server import Sandbox


def _secret_volume(root: Path, source: Path) -> None:
    """Point ``root/tls.crt`` and ``root/tls.key`` at ``source`` through a ``..data`` link, swapped atomically.

    The kubelet's AtomicWriter updates Secret volumes this way (pkg/volume/util/atomic_writer.go):
    files in a timestamped directory, ``..data`` -> that directory, each key a link through ``..data``.
    """
    staging = root / "..data_tmp"
    staging.unlink(missing_ok=True)
    staging.symlink_to(source.name)
    os.replace(staging, root / "..data")
    for name in ("tls.crt", "tls.key"):
        if not (root / name).is_symlink():
            (root / name).symlink_to(Path("..data") / name)


def _presented_cn(port: int, ca: Path) -> str:
    context = ssl.create_default_context(cafile=str(ca))
    context.check_hostname = False
    conn = http.client.HTTPSConnection("127.0.0.1", port, context=context, timeout=10)
    try:
        conn.request("GET", "/version")
        conn.getresponse().read()
        cert = conn.sock.getpeercert()  # type: ignore[union-attr]
        return dict(pair[0] for pair in cert["subject"])["commonName"]
    finally:
        conn.close()


def test_renewed_certificate_is_served_without_restart(sandbox: Sandbox, extender_factory, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    volume = tmp_path / "volume"
    volume.mkdir()
    old = volume / "..2026_01_01"
    new = volume / "..2026_03_01"
    self_signed_pair(old, "first")
    self_signed_pair(new, "second")
    _secret_volume(volume, old)
    ext = extender_factory(tls_cert_file=str(volume / "tls.crt"), tls_private_key_file=str(volume / "tls.key"))
    port = ext.running.port
    assert _presented_cn(port, old / "tls.crt") == "first"

    context = ssl.create_default_context(cafile=str(old / "tls.crt"))
    context.check_hostname = False
    kept = http.client.HTTPSConnection("127.0.0.1", port, context=context, timeout=10)
    kept.request("GET", "/version")
    assert kept.getresponse().read() == b"0.1.0"

    _secret_volume(volume, new)
    wait_for(lambda: _try_cn(port, new / "tls.crt") == "second", what="the renewed certificate to be served")
    kept.request("GET", "/version")  # the connection from before the swap finishes its work
    assert kept.getresponse().read() == b"0.1.0"
    kept.close()


def _try_cn(port: int, ca: Path) -> str | None:
    try:
        return _presented_cn(port, ca)
    except (ssl.SSLError, OSError):
        return None


@pytest.mark.parametrize("damage", ["truncated", "directory", "mismatched"])
def test_unusable_new_pair_is_refused_and_the_old_one_kept(tmp_path: Path, damage: str,
                                                           caplog: pytest.LogCaptureFixture) -> None:
    cert, key = self_signed_pair(tmp_path / "live", "first")
    other_cert, other_key = self_signed_pair(tmp_path / "other", "other")
    now = [0.0]
    pair = ReloadingKeyPair(str(cert), str(key), check_interval=1.0, clock=lambda: now[0])
    before = pair.current
    if damage == "truncated":
        cert.write_bytes(cert.read_bytes()[:40])
    elif damage == "directory":
        cert.unlink()
        cert.mkdir()
    else:
        shutil.copy(other_key, key)  # a key that does not match the certificate
    now[0] += 2
    with caplog.at_level(logging.ERROR, logger="kubectl_gpushare.extender.certs"):
        assert pair.current is before
        now[0] += 2
        assert pair.current is before  # refused once, not again until the files change
    assert pair.refusals == 1 and pair.reloads == 0
    assert len(caplog.records) == 1 and "still serving the previous one" in caplog.records[0].getMessage()
    assert "\n" not in caplog.records[0].getMessage()

    if damage == "directory":
        cert.rmdir()
    shutil.copy(other_cert, cert)
    shutil.copy(other_key, key)
    now[0] += 2
    assert pair.current is not before and pair.reloads == 1


def test_files_are_looked_at_once_per_interval(tmp_path: Path) -> None:
    cert, key = self_signed_pair(tmp_path / "a", "first")
    other_cert, other_key = self_signed_pair(tmp_path / "b", "second")
    now = [0.0]
    pair = ReloadingKeyPair(str(cert), str(key), check_interval=5.0, clock=lambda: now[0])
    first = pair.current
    shutil.copy(other_cert, cert)
    shutil.copy(other_key, key)
    now[0] += 1
    assert pair.current is first  # within the interval: not looked at yet
    now[0] += 5
    assert pair.current is not first and pair.reloads == 1


def test_missing_files_keep_the_old_pair(tmp_path: Path) -> None:
    cert, key = self_signed_pair(tmp_path / "a", "first")
    now = [0.0]
    pair = ReloadingKeyPair(str(cert), str(key), clock=lambda: now[0])
    first = pair.current
    cert.unlink()
    now[0] += 2
    assert pair.current is first and pair.refusals == 0  # a swap in progress: nothing to judge yet
