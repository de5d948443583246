"""API keys and TLS against the in-process fake server of test_retry.py, behind an interceptor
that checks ``authorization`` as frontdesk-server's auth layer does (no live server needed)."""

from __future__ import annotations

import asyncio
import os
import pathlib
import threading
from concurrent import futures
from typing import Any, Callable, Dict, Iterator, List, Optional, Tuple

import grpc
import pytest
from google.protobuf import duration_pb2
from google.rpc import error_details_pb2, status_pb2
from test_retry import FAST, RUN, WANT, Fake, ids

from frontdesk import (
    QUOTA_EXCEEDED,
    SCOPE_MISSING,
    UNAUTHENTICATED,
    AsyncFrontdeskClient,
    FrontdeskClient,
    FrontdeskError,
    TlsConfig,
)
from frontdesk.v1 import conversation_pb2_grpc, workflow_pb2_grpc

SECRET = "AbCdEfGhIjKlMnOpQrStUvWxYz0123456789-_abcde"
KEY = f"fdk_0123456789abcdef_{SECRET}"
#: A key whose scopes lack conversation:write.
NARROW_KEY = "fdk_fedcba9876543210_narrowNarrowNarrowNarrowNarrowNarrowNarrow12"
#: A key the server does not know (or revoked).
REVOKED_KEY = "fdk_1111111111111111_revokedRevokedRevokedRevokedRevokedRevoked12"
#: A key whose tenant is over its request quota.
BUSY_KEY = "fdk_00000000000000ff_busyBusyBusyBusyBusyBusyBusyBusyBusyBusyBusy1"
TLS_DIR = pathlib.Path(__file__).resolve().parents[2] / "testdata" / "tls"


def refusal(
    code: grpc.StatusCode, reason: str, metadata: Dict[str, str], delay: Optional[float] = None
) -> bytes:
    status = status_pb2.Status(code=code.value[0], message=f"refused: {reason}")
    status.details.add().Pack(
        error_details_pb2.ErrorInfo(reason=reason, domain="frontdesk.dev", metadata=metadata)
    )
    if delay is not None:
        seconds = int(delay)
        nanos = int(round((delay - seconds) * 1e9))
        status.details.add().Pack(
            error_details_pb2.RetryInfo(
                retry_delay=duration_pb2.Duration(seconds=seconds, nanos=nanos)
            )
        )
    return status.SerializeToString()


REFUSALS: Dict[Optional[str], Tuple[grpc.StatusCode, bytes]] = {
    None: (
        grpc.StatusCode.UNAUTHENTICATED,
        refusal(grpc.StatusCode.UNAUTHENTICATED, UNAUTHENTICATED, {}),
    ),
    f"Bearer {NARROW_KEY}": (
        grpc.StatusCode.PERMISSION_DENIED,
        refusal(grpc.StatusCode.PERMISSION_DENIED, SCOPE_MISSING, {"scope": "conversation:write"}),
    ),
    f"Bearer {BUSY_KEY}": (
        grpc.StatusCode.RESOURCE_EXHAUSTED,
        refusal(
            grpc.StatusCode.RESOURCE_EXHAUSTED, QUOTA_EXCEEDED, {"quota": "requests_per_sec"}, 1.5
        ),
    ),
}


class Gate(grpc.ServerInterceptor):
    """Records (method, authorization) of every call and refuses as the auth layer would."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.seen: List[Tuple[str, Optional[str]]] = []

    def intercept_service(self, continuation: Callable[..., Any], details: Any) -> Any:
        header = dict(details.invocation_metadata).get("authorization")
        with self.lock:
            self.seen.append((details.method.rsplit("/", 1)[-1], header))
        if header == f"Bearer {KEY}":
            return continuation(details)
        code, trailer = REFUSALS.get(header, REFUSALS[None])

        def abort(request: Any, context: grpc.ServicerContext) -> Any:
            context.set_trailing_metadata((("grpc-status-details-bin", trailer),))
            context.abort(code, "refused")

        def abort_stream(request: Any, context: grpc.ServicerContext) -> Iterator[Any]:
            abort(request, context)
            yield  # pragma: no cover - abort raised

        handler = continuation(details)
        if handler.unary_stream is not None:
            return grpc.unary_stream_rpc_method_handler(
                abort_stream, handler.request_deserializer, handler.response_serializer
            )
        return grpc.unary_unary_rpc_method_handler(
            abort, handler.request_deserializer, handler.response_serializer
        )

    def headers(self) -> List[Optional[str]]:
        with self.lock:
            return [h for _, h in self.seen]

    def methods(self) -> List[str]:
        with self.lock:
            return [m for m, _ in self.seen]


def start(tls: bool = False) -> Tuple[Fake, Gate, Any, int]:
    fake, gate = Fake(), Gate()
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=4), interceptors=[gate])
    conversation_pb2_grpc.add_ConversationServiceServicer_to_server(fake, server)
    workflow_pb2_grpc.add_WorkflowServiceServicer_to_server(fake, server)
    if tls:
        credentials = grpc.ssl_server_credentials(
            [((TLS_DIR / "server.key").read_bytes(), (TLS_DIR / "server.pem").read_bytes())],
            root_certificates=(TLS_DIR / "ca.pem").read_bytes(),
            require_client_auth=True,
        )
        port = server.add_secure_port("127.0.0.1:0", credentials)
    else:
        port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    return fake, gate, server, port


@pytest.fixture
def gated() -> Iterator[Tuple[Fake, Gate, str]]:
    fake, gate, server, port = start()
    yield fake, gate, f"127.0.0.1:{port}"
    server.stop(None)


def test_key_is_sent_with_every_call_retries_and_reattaches(gated: Tuple[Fake, Gate, str]) -> None:
    fake, gate, addr = gated
    fake.start_failures = 1
    fake.break_after = 3
    with FrontdeskClient(addr, api_key=KEY, retry=FAST) as client:
        client.start_conversation(idempotency_key="k1")
        assert ids(list(client.send_message("c1", "hi", idempotency_key="k2"))) == WANT
        assert [e.event_id for e in client.subscribe_run(RUN, after_event_id=4)] == [5]
    assert gate.methods() == [
        "StartConversation",
        "StartConversation",  # retried after ABORTED
        "SendMessage",
        "SubscribeRun",  # re-attached after the stream broke
        "SendMessage",  # the call again, for its recorded result
        "SubscribeRun",
    ]
    assert gate.headers() == [f"Bearer {KEY}"] * 6


def test_async_key_is_sent_with_every_call(gated: Tuple[Fake, Gate, str]) -> None:
    fake, gate, addr = gated
    fake.start_failures = 1
    fake.break_after = 3

    async def main() -> None:
        async with AsyncFrontdeskClient(addr, api_key=KEY, retry=FAST) as client:
            await client.start_conversation(idempotency_key="k1")
            items = [i async for i in client.send_message("c1", "hi", idempotency_key="k2")]
            assert ids(items) == WANT
            assert [e.event_id async for e in client.subscribe_run(RUN, 4)] == [5]

    asyncio.run(main())
    assert len(gate.seen) == 6
    assert gate.headers() == [f"Bearer {KEY}"] * 6


@pytest.mark.parametrize(
    "key, code, reason",
    [
        (None, grpc.StatusCode.UNAUTHENTICATED, UNAUTHENTICATED),
        (REVOKED_KEY, grpc.StatusCode.UNAUTHENTICATED, UNAUTHENTICATED),
        (NARROW_KEY, grpc.StatusCode.PERMISSION_DENIED, SCOPE_MISSING),
        (BUSY_KEY, grpc.StatusCode.RESOURCE_EXHAUSTED, QUOTA_EXCEEDED),
    ],
)
def test_refusals_are_decoded_and_not_retried(
    gated: Tuple[Fake, Gate, str], key: Optional[str], code: grpc.StatusCode, reason: str
) -> None:
    fake, gate, addr = gated
    with FrontdeskClient(addr, api_key=key, retry=FAST) as client:
        with pytest.raises(FrontdeskError) as unary:
            client.start_conversation(idempotency_key="k1")
        with pytest.raises(FrontdeskError) as streamed:
            list(client.send_message("c1", "hi", idempotency_key="k2"))
    for err in (unary.value, streamed.value):
        assert (err.code, err.reason, err.retryable) == (code, reason, False)
    assert gate.methods() == ["StartConversation", "SendMessage"], "refusals are final"
    err = unary.value
    if reason == SCOPE_MISSING:
        assert err.error_metadata == {"scope": "conversation:write"}
    if reason == QUOTA_EXCEEDED:
        assert err.error_metadata == {"quota": "requests_per_sec"}
        assert err.retry_delay == pytest.approx(1.5)
        assert "retry after 1.5s" in str(err)
    else:
        assert err.retry_delay is None
    assert SECRET not in str(err) and "busyBusy" not in str(err)


def test_async_quota_refusal_is_not_retried(gated: Tuple[Fake, Gate, str]) -> None:
    fake, gate, addr = gated

    async def main() -> FrontdeskError:
        async with AsyncFrontdeskClient(addr, api_key=BUSY_KEY, retry=FAST) as client:
            with pytest.raises(FrontdeskError) as info:
                await client.start_conversation(idempotency_key="k1")
            return info.value

    err = asyncio.run(main())
    assert (err.code, err.reason, err.retry_delay) == (
        grpc.StatusCode.RESOURCE_EXHAUSTED,
        QUOTA_EXCEEDED,
        pytest.approx(1.5),
    )
    assert len(gate.seen) == 1


def test_the_key_is_never_shown() -> None:
    tls = TlsConfig.from_files(
        ca=TLS_DIR / "ca.pem", cert=TLS_DIR / "client.pem", key=TLS_DIR / "client.key"
    )
    clients: List[Any] = [
        FrontdeskClient("127.0.0.1:1", api_key=KEY),
        FrontdeskClient("127.0.0.1:1", api_key=KEY, tls=tls),
    ]

    async def make_async() -> None:
        client = AsyncFrontdeskClient("127.0.0.1:1", api_key=KEY, tls=True)
        clients.append(client)
        text = repr(client)
        await client.close()
        assert "tls=True" in text

    asyncio.run(make_async())
    for client in clients:
        for text in (repr(client), str(client), f"{client!r:>10}"):
            assert SECRET not in text and "api_key=<redacted>" in text, text
    assert repr(clients[1]).startswith("FrontdeskClient(target='127.0.0.1:1', tls=True")
    assert "PRIVATE KEY" not in repr(tls) and "private_key=<redacted>" in repr(tls), repr(tls)
    assert "api_key=None" in repr(FrontdeskClient("127.0.0.1:1"))
    for client in clients[:2]:
        client.close()

    with pytest.raises(ValueError) as bad:
        FrontdeskClient("127.0.0.1:1", api_key=f"{SECRET}\n{SECRET}")
    assert SECRET not in str(bad.value)
    with pytest.raises(ValueError):
        FrontdeskClient("127.0.0.1:1", api_key=KEY, metadata=[("authorization", "Bearer x")])
    with pytest.raises(ValueError):
        FrontdeskClient("127.0.0.1:1", tls=True, credentials=grpc.ssl_channel_credentials())
    with pytest.raises(ValueError):
        TlsConfig(certificate_chain=b"cert only")


@pytest.fixture
def tls_server() -> Iterator[Tuple[Gate, int]]:
    _, gate, server, port = start(tls=True)
    yield gate, port
    server.stop(None)


def test_mutual_tls(tls_server: Tuple[Gate, int]) -> None:
    gate, port = tls_server
    full = TlsConfig.from_files(
        ca=TLS_DIR / "ca.pem", cert=TLS_DIR / "client.pem", key=TLS_DIR / "client.key"
    )
    by_ip = TlsConfig.from_files(
        ca=TLS_DIR / "ca.pem",
        cert=TLS_DIR / "client.pem",
        key=TLS_DIR / "client.key",
        server_name="localhost",
    )
    for target, tls in ((f"localhost:{port}", full), (f"127.0.0.1:{port}", by_ip)):
        with FrontdeskClient(target, api_key=KEY, tls=tls, timeout=5) as client:
            assert client.start_conversation().conversation.conversation_id == "c1"
    assert gate.headers() == [f"Bearer {KEY}"] * 2

    # The server requires a client certificate; and the client must trust the server's CA.
    no_cert = TlsConfig.from_files(ca=TLS_DIR / "ca.pem")
    for tls in (no_cert, True):
        with FrontdeskClient(f"localhost:{port}", api_key=KEY, tls=tls, timeout=5) as client:
            with pytest.raises(FrontdeskError) as info:
                client.start_conversation()
        assert info.value.code == grpc.StatusCode.UNAVAILABLE
    assert len(gate.seen) == 2


def test_async_mutual_tls(tls_server: Tuple[Gate, int]) -> None:
    gate, port = tls_server
    tls = TlsConfig.from_files(
        ca=TLS_DIR / "ca.pem", cert=TLS_DIR / "client.pem", key=TLS_DIR / "client.key"
    )

    async def main() -> str:
        async with AsyncFrontdeskClient(f"localhost:{port}", api_key=KEY, tls=tls, timeout=5) as c:
            return (await c.start_conversation()).conversation.conversation_id

    assert asyncio.run(main()) == "c1"
    assert gate.headers() == [f"Bearer {KEY}"]


def test_live_server_over_mutual_tls() -> None:
    """FRONTDESK_TLS_ADDR (host:port, such as localhost:PORT) names a running frontdesk-server
    serving TLS with the certificates of client/testdata/tls and requiring client certificates
    (scripts/sdk-tests.sh starts one); FRONTDESK_KEY, when set, is sent as the key."""
    addr = os.environ.get("FRONTDESK_TLS_ADDR", "")
    if not addr:
        pytest.skip("FRONTDESK_TLS_ADDR not set: no live TLS frontdesk-server to test against")
    tls = TlsConfig.from_files(
        ca=TLS_DIR / "ca.pem", cert=TLS_DIR / "client.pem", key=TLS_DIR / "client.key"
    )
    key = os.environ.get("FRONTDESK_KEY") or None
    with FrontdeskClient(addr, api_key=key, tls=tls, timeout=10) as client:
        assert "intake" in [w.name for w in client.list_workflows()]
        assert client.start_conversation("intake").conversation.conversation_id
    without_cert = TlsConfig.from_files(ca=TLS_DIR / "ca.pem")
    with FrontdeskClient(addr, api_key=key, tls=without_cert, timeout=10) as client:
        with pytest.raises(FrontdeskError) as info:
            client.list_workflows()
    assert info.value.code == grpc.StatusCode.UNAVAILABLE
