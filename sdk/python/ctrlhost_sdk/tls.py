"""TLS for a plugin served over TCP: what the host's `endpoint.tls` dials (docs/operator-spec.md).

Configured by environment variables, read by Plugin.run():

    CTRLHOST_PLUGIN_TLS_CERT_FILE       PEM certificate chain the plugin presents  } both or
    CTRLHOST_PLUGIN_TLS_KEY_FILE        PEM private key of that certificate        } neither
    CTRLHOST_PLUGIN_TLS_CLIENT_CA_FILE  PEM CA bundle: when set, the host must present a client
                                        certificate signed by it (mutual TLS)

Without a certificate the plugin serves plaintext, which is allowed only on Unix sockets and
loopback hosts (localhost, 127.*, ::1): a plugin asked to listen on any other TCP address
refuses to start rather than expose an unauthenticated reconcile endpoint.

Plain functions and a value type; nothing here is shared between threads.
"""

from __future__ import annotations

import os
from typing import Any, Mapping, NamedTuple, Optional

CERT_FILE_ENV = "CTRLHOST_PLUGIN_TLS_CERT_FILE"
KEY_FILE_ENV = "CTRLHOST_PLUGIN_TLS_KEY_FILE"
CLIENT_CA_FILE_ENV = "CTRLHOST_PLUGIN_TLS_CLIENT_CA_FILE"


class ServerTls(NamedTuple):
    """The server side of TLS as PEM bytes; client_ca_pem None: no client certificate asked."""
    cert_chain_pem: bytes
    private_key_pem: bytes
    client_ca_pem: Optional[bytes] = None

    @property
    def mode(self) -> str:
        return "mutual" if self.client_ca_pem else "tls"


def _read_pem(variable: str, path: str) -> bytes:
    try:
        with open(path, "rb") as f:
            pem = f.read()
    except OSError as e:
        raise ValueError("%s=%s: cannot read: %s" % (variable, path, e.strerror)) from None
    if b"-----BEGIN " not in pem:
        raise ValueError("%s=%s: not a PEM file (no -----BEGIN line)" % (variable, path))
    return pem


def load_server_tls(cert_file: str, key_file: str, client_ca_file: str = "") -> Optional[ServerTls]:
    """Reads the files named; None (plaintext) when none is. ValueError naming the variable and
    the file when only one of cert/key is set, a client CA comes without a certificate, or a file
    cannot be read or is not PEM."""
    if bool(cert_file) != bool(key_file):
        raise ValueError("%s and %s must be set together (only %s is set)" % (
            CERT_FILE_ENV, KEY_FILE_ENV, CERT_FILE_ENV if cert_file else KEY_FILE_ENV))
    if not cert_file:
        if client_ca_file:
            raise ValueError("%s needs %s and %s (client certificates are a TLS feature)" % (
                CLIENT_CA_FILE_ENV, CERT_FILE_ENV, KEY_FILE_ENV))
        return None
    return ServerTls(_read_pem(CERT_FILE_ENV, cert_file), _read_pem(KEY_FILE_ENV, key_file),
                     _read_pem(CLIENT_CA_FILE_ENV, client_ca_file) if client_ca_file else None)


def server_tls_from_env(env: Optional[Mapping[str, str]] = None) -> Optional[ServerTls]:
    """load_server_tls with the three environment variables (os.environ by default)."""
    env = os.environ if env is None else env
    return load_server_tls(env.get(CERT_FILE_ENV, ""), env.get(KEY_FILE_ENV, ""),
                           env.get(CLIENT_CA_FILE_ENV, ""))


def is_loopback_or_unix(listen: str) -> bool:
    """True for "unix:..." and for "host:port" whose host is localhost, 127.* or ::1."""
    if listen.startswith("unix:"):
        return True
    host = listen.rpartition(":")[0]
    if host.startswith("[") and host.endswith("]"):
        host = host[1:-1]
    return host in ("localhost", "::1") or host.startswith("127.")


def check_plaintext_allowed(listen: str) -> None:
    """ValueError unless plaintext may be served on `listen` (a Unix socket or loopback)."""
    if not is_loopback_or_unix(listen):
        raise ValueError(
            "refusing to serve plaintext on %s: a TCP address other than localhost, 127.* or "
            "::1 needs TLS: set %s and %s (and %s to require the host's client certificate)"
            % (listen, CERT_FILE_ENV, KEY_FILE_ENV, CLIENT_CA_FILE_ENV))


def server_credentials(tls: ServerTls) -> Any:
    """grpc.ServerCredentials for `tls` (client certificate required when it has a client CA;
    Any: Debian ships no stubs for grpcio)."""
    import grpc  # here so that the module imports without grpc (unit tests of the parsing)
    return grpc.ssl_server_credentials(
        [(tls.private_key_pem, tls.cert_chain_pem)], root_certificates=tls.client_ca_pem,
        require_client_auth=tls.client_ca_pem is not None)
