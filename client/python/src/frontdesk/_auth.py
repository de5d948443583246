"""API keys and TLS: what both clients send with every call, and how they connect."""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any, List, Optional, Sequence, Tuple, Union

import grpc

from frontdesk import _common as c

PathLike = Union[str, "os.PathLike[str]"]


@dataclass(frozen=True, repr=False)
class TlsConfig:
    """How a client connects over TLS.

    ``root_certificates``: PEM of the CA certificate(s) that signed the server's certificate;
    None trusts the system's roots. ``certificate_chain`` and ``private_key``: a PEM client
    certificate and its key, for mutual TLS (both or neither). ``server_name``: the name to
    verify the server's certificate against when it differs from the target's host (connecting
    by IP address to a certificate that names a host). ``TlsConfig.from_files`` reads the PEM
    files. The private key never appears in ``repr``.
    """

    root_certificates: Optional[bytes] = None
    certificate_chain: Optional[bytes] = None
    private_key: Optional[bytes] = None
    server_name: Optional[str] = None

    def __repr__(self) -> str:
        def size(pem: Optional[bytes]) -> str:
            return "None" if pem is None else f"<{len(pem)} bytes>"

        key = "None" if self.private_key is None else "<redacted>"
        return (
            f"TlsConfig(root_certificates={size(self.root_certificates)}, "
            f"certificate_chain={size(self.certificate_chain)}, private_key={key}, "
            f"server_name={self.server_name!r})"
        )

    def __post_init__(self) -> None:
        if (self.certificate_chain is None) != (self.private_key is None):
            raise ValueError("certificate_chain and private_key go together (mutual TLS)")

    @classmethod
    def from_files(
        cls,
        ca: Optional[PathLike] = None,
        cert: Optional[PathLike] = None,
        key: Optional[PathLike] = None,
        server_name: Optional[str] = None,
    ) -> "TlsConfig":
        """A TlsConfig of PEM files: ``ca`` the CA certificate(s), ``cert`` and ``key`` a client
        certificate and its key (mutual TLS)."""

        def read(path: Optional[PathLike]) -> Optional[bytes]:
            if path is None:
                return None
            with open(path, "rb") as f:
                return f.read()

        return cls(read(ca), read(cert), read(key), server_name)

    def channel_credentials(self) -> grpc.ChannelCredentials:
        return grpc.ssl_channel_credentials(
            root_certificates=self.root_certificates,
            private_key=self.private_key,
            certificate_chain=self.certificate_chain,
        )

    def channel_options(self) -> List[Tuple[str, Any]]:
        if not self.server_name:
            return []
        return [("grpc.ssl_target_name_override", self.server_name)]


TlsOption = Union[bool, TlsConfig, None]


def bearer_metadata(
    api_key: Optional[str], metadata: Optional[c.Metadata]
) -> List[Tuple[str, Any]]:
    """``metadata`` plus ``authorization: Bearer <api_key>`` when a key is given."""
    out = list(metadata or [])
    if api_key is None:
        return out
    key = api_key.strip()
    # Checked here, where the error cannot show the key; grpc would reject it at the first call.
    if not key or any(ch <= " " or ch > "~" for ch in key):
        raise ValueError(
            "api_key must be non-empty visible ASCII (a key from `frontdesk-server keys create`)"
        )
    if any(k.lower() == "authorization" for k, _ in out):
        raise ValueError("give the API key as api_key or as authorization metadata, not both")
    out.append(("authorization", f"Bearer {key}"))
    return out


def has_api_key(metadata: Sequence[Tuple[str, Any]]) -> bool:
    return any(k.lower() == "authorization" for k, _ in metadata)


def resolve_tls(
    tls: TlsOption, credentials: Optional[grpc.ChannelCredentials]
) -> Tuple[Optional[grpc.ChannelCredentials], List[Tuple[str, Any]]]:
    """The channel credentials (None: plaintext) and extra channel options of ``tls`` or
    ``credentials``."""
    if tls is None or tls is False:
        return credentials, []
    if credentials is not None:
        raise ValueError("give tls or credentials, not both")
    if tls is True:
        tls = TlsConfig()
    if not isinstance(tls, TlsConfig):
        raise TypeError(f"tls must be a bool or a TlsConfig, not {type(tls).__name__}")
    return tls.channel_credentials(), tls.channel_options()


def describe(
    cls: str, target: Optional[str], tls: bool, metadata: Sequence[Tuple[str, Any]]
) -> str:
    """A client's repr: where it connects (``target`` None: a channel given to it), whether
    over TLS and with a key; never the key."""
    key = "<redacted>" if has_api_key(metadata) else None
    where = "channel=<given>" if target is None else f"target={target!r}, tls={tls}"
    return f"{cls}({where}, api_key={key})"
