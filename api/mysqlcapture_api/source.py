"""Where the worker reads from: the source server, its credentials and TLS."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from mysqlcapture_api.base import Model, Rule

Flavor = Literal["auto", "mysql", "mariadb"]
"""spec.source.flavor."""
TlsMode = Literal["disabled", "preferred", "required", "verify-ca", "verify-identity"]
"""spec.source.tls.mode."""


class SecretKeyRef(Model):
    """A key of a Secret in the capture's namespace."""

    name: str = Field(min_length=1, description="Name of the Secret, in the capture's namespace.")
    key: str = Field(min_length=1, description="Key within the Secret whose value is the secret.")


class SecretFrom(Model):
    """Where a secret (a password, a key, a CA bundle) comes from: exactly one of env, file, secretKeyRef."""

    env: str | None = Field(
        default=None,
        min_length=1,
        description="Name of an environment variable of the worker holding the value.",
    )
    file: str | None = Field(
        default=None,
        min_length=1,
        description="Path of a file holding the value; one trailing newline is ignored.",
    )
    secret_key_ref: SecretKeyRef | None = Field(
        default=None,
        description="A Secret key holding the value; the operator mounts it into the worker pod as a file (kept "
        "current by the kubelet).",
    )

    rules = (
        Rule(
            holds=lambda p: sum(v is not None for v in (p.env, p.file, p.secret_key_ref)) == 1,
            cel="(has(self.env)?1:0)+(has(self.file)?1:0)+(has(self.secretKeyRef)?1:0) == 1",
            message="set exactly one of env, file, secretKeyRef",
        ),
    )


PasswordFrom = SecretFrom
"""spec.source.passwordFrom."""


class Tls(Model):
    """TLS on the connection to the source."""

    mode: TlsMode = Field(
        default="preferred",
        description=(
            "disabled, preferred (TLS when the server offers it), required (encrypted, certificate not "
            "checked), verify-ca (certificate signed by caFile), verify-identity (also the host name). "
            "Default: preferred."
        ),
    )
    ca_file: str | None = Field(
        default=None,
        min_length=1,
        description=("Path of the CA bundle for verify-ca and verify-identity. Default: the system's trusted CAs."),
    )


class Source(Model):
    """The MySQL or MariaDB server whose binlog is captured."""

    host: str = Field(min_length=1, description="Host name or IP address of the server.")
    port: int = Field(default=3306, ge=1, le=65535, description="TCP port of the server. Default: 3306.")
    user: str = Field(
        min_length=1,
        description="User with REPLICATION SLAVE, REPLICATION CLIENT and SELECT on the captured tables.",
    )
    password_from: PasswordFrom = Field(description="Where the user's password comes from.")
    tls: Tls = Field(default=Tls(), description="TLS on the connection. Default: mode preferred.")
    server_id: int = Field(
        ge=1,
        le=4294967295,
        description=(
            "The worker's own replica server_id (1 to 4294967295); it must differ from every server and "
            "replica in the topology."
        ),
    )
    flavor: Flavor = Field(
        default="auto",
        description="Server flavor: mysql, mariadb, or auto to detect it. Default: auto.",
    )
    connect_timeout_seconds: int = Field(
        default=10,
        ge=1,
        le=600,
        description="Connect timeout, in seconds (1 to 600). Default: 10.",
    )
