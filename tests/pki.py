"""Test certificates made with openssl: CAs, and server certificates for 127.0.0.1 and localhost."""

from __future__ import annotations

import subprocess
from pathlib import Path


def make_ca(directory: Path, name: str) -> tuple[Path, Path]:
    """A CA (certificate, key)."""
    key, cert = directory / f"{name}-key.pem", directory / f"{name}.pem"
    subprocess.run(
        ["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2", "-subj", f"/CN={name}",
         "-keyout", str(key), "-out", str(cert)],
        check=True, capture_output=True,
    )  # fmt: skip
    return cert, key


def server_cert(directory: Path, ca: tuple[Path, Path], name: str = "server") -> tuple[Path, Path]:
    """A certificate signed by `ca` naming 127.0.0.1 and localhost (subject and subjectAltName), and its key
    (PKCS#8, unencrypted)."""
    key, csr, cert = directory / f"{name}-key.pem", directory / f"{name}.csr", directory / f"{name}.pem"
    ext = directory / f"{name}.ext"
    ext.write_text("subjectAltName=DNS:localhost,IP:127.0.0.1\n")
    subprocess.run(
        ["openssl", "req", "-newkey", "rsa:2048", "-nodes", "-subj", "/CN=127.0.0.1", "-keyout", str(key),
         "-out", str(csr)],
        check=True, capture_output=True,
    )  # fmt: skip
    subprocess.run(
        ["openssl", "x509", "-req", "-in", str(csr), "-CA", str(ca[0]), "-CAkey", str(ca[1]), "-CAcreateserial",
         "-days", "2", "-extfile", str(ext), "-out", str(cert)],
        check=True, capture_output=True,
    )  # fmt: skip
    return cert, key
