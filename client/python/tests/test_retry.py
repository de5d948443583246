"""Retries, error details and re-attaching, against a tiny in-process fake gRPC server (no live
frontdesk-server needed): the fake answers StartConversation, SendMessage and SubscribeRun as
each test scripts it."""

from __future__ import annotations

import asyncio
import threading
import time
from concurrent import futures
from typing import Any, Callable, Dict, Iterator, List, Optional

import grpc
import pytest
from google.protobuf import duration_pb2
from google.rpc import error_details_pb2, status_pb2

from frontdesk import AsyncFrontdeskClient, FrontdeskClient, FrontdeskError, RetryPolicy
from frontdesk.v1 import (
    common_pb2,
    conversation_pb2,
    conversation_pb2_grpc,
    workflow_pb2,
    workflow_pb2_grpc,
)

from cancelling import cancel_inside_loop

RUN = "0b6a3d5e-2f7c-4b8e-9d1a-5c3e7f9a1b2d"


def status_trailer(
    code: grpc.StatusCode, message: str, reason: str, delay: Optional[float] = None
) -> bytes:
    status = status_pb2.Status(code=code.value[0], message=message)
    info = error_details_pb2.ErrorInfo(
        reason=reason, domain="frontdesk.dev", metadata={"kind": "conversation"}
    )
    status.details.add().Pack(info)
    if delay is not None:
        retry = error_details_pb2.RetryInfo(
            retry_delay=duration_pb2.Duration(
                seconds=int(delay), nanos=int(round((delay - int(delay)) * 1e9))
            )
        )
        status.details.add().Pack(retry)
    return status.SerializeToString()


def fail(
    context: grpc.ServicerContext,
    code: grpc.StatusCode,
    reason: str,
    delay: Optional[float] = None,
) -> None:
    context.set_trailing_metadata(
        (("grpc-status-details-bin", status_trailer(code, "scripted failure", reason, delay)),)
    )
    context.abort(code, "scripted failure")


def event(event_id: int, stamp: int = 0) -> common_pb2.RunEvent:
    ev = common_pb2.RunEvent(run_id=RUN, event_id=event_id, node=f"n{event_id}")
    ev.time.seconds = 1_700_000_000 + stamp
    ev.time.nanos = event_id
    if event_id == 1:
        ev.run_started.thread_id = "c1"
    elif event_id == LAST:
        ev.run_finished.SetInParent()
    else:
        ev.node_started.step = event_id
    return ev


LAST = 5


class Fake(conversation_pb2_grpc.ConversationServiceServicer, workflow_pb2_grpc.WorkflowServiceServicer):
    """Scripted: ``start_failures`` ABORTED THREAD_BUSY answers (RetryInfo ``delay``) before
    StartConversation succeeds; SendMessage breaks its first stream after ``break_after``
    events (0: never), and its later calls answer ABORTED THREAD_BUSY (RetryInfo ``delay``)
    until ``busy_for`` seconds have passed since the first (the run held by a replica that
    died); SubscribeRun answers NOT_FOUND when ``subscribe_not_found``, else the events after
    the id asked for, and then, when ``subscribe_holds``, stays open until the client goes."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.start_calls: List[float] = []
        self.send_calls = 0
        self.send_times: List[float] = []
        self.busy_times: List[float] = []
        self.busy_for = 0.0
        self.subscribe_calls: List[int] = []
        self.start_failures = 0
        self.delay: Optional[float] = 0.3
        self.break_after = 0
        self.subscribe_not_found = False
        self.subscribe_holds = False
        #: SubscribeRun's last event is a RunFailed (FAILED_PRECONDITION CONVERSATION_ENDED).
        self.run_fails = False

    def StartConversation(self, request: Any, context: grpc.ServicerContext) -> Any:
        with self.lock:
            self.start_calls.append(time.monotonic())
            n = len(self.start_calls)
        if n <= self.start_failures:
            fail(context, grpc.StatusCode.ABORTED, "THREAD_BUSY", self.delay)
        return conversation_pb2.StartConversationResponse(
            conversation=conversation_pb2.Conversation(conversation_id="c1")
        )

    def SendMessage(self, request: Any, context: grpc.ServicerContext) -> Iterator[Any]:
        with self.lock:
            self.send_calls += 1
            n = self.send_calls
            now = time.monotonic()
            self.send_times.append(now)
            busy = n > 1 and now - self.send_times[0] < self.busy_for
            if busy:
                self.busy_times.append(now)
        if busy:
            fail(context, grpc.StatusCode.ABORTED, "THREAD_BUSY", self.delay)
        for i in range(1, LAST + 1):
            if n == 1 and self.break_after and i > self.break_after:
                fail(context, grpc.StatusCode.UNAVAILABLE, "STORE_UNAVAILABLE")
            yield conversation_pb2.SendMessageResponse(event=event(i))
        yield conversation_pb2.SendMessageResponse(
            result=conversation_pb2.TurnResult(run_id=RUN, replayed=n > 1)
        )

    def SubscribeRun(self, request: Any, context: grpc.ServicerContext) -> Iterator[Any]:
        with self.lock:
            self.subscribe_calls.append(request.after_event_id)
        if self.subscribe_not_found:
            fail(context, grpc.StatusCode.NOT_FOUND, "NOT_FOUND")
        for i in range(request.after_event_id + 1, LAST + 1):
            ev = event(i)
            if i == LAST and self.run_fails:
                ev.run_failed.code = grpc.StatusCode.FAILED_PRECONDITION.value[0]
                ev.run_failed.message = "the conversation has ended"
                ev.run_failed.reason = "CONVERSATION_ENDED"
            yield workflow_pb2.SubscribeRunResponse(event=ev)
        while self.subscribe_holds and context.is_active():
            time.sleep(0.01)


@pytest.fixture
def fake() -> Iterator[Any]:
    servicer = Fake()
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=4))
    conversation_pb2_grpc.add_ConversationServiceServicer_to_server(servicer, server)
    workflow_pb2_grpc.add_WorkflowServiceServicer_to_server(servicer, server)
    port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    servicer.addr = f"127.0.0.1:{port}"  # type: ignore[attr-defined]
    yield servicer
    server.stop(None)


FAST = RetryPolicy(initial_backoff=0.01, max_backoff=0.02)


def test_error_details_are_parsed(fake: Fake) -> None:
    fake.start_failures = 10
    with FrontdeskClient(fake.addr, retry=False) as client:  # type: ignore[attr-defined]
        with pytest.raises(FrontdeskError) as info:
            client.start_conversation(idempotency_key="k1")
    err = info.value
    assert err.code == grpc.StatusCode.ABORTED
    assert err.reason == "THREAD_BUSY"
    assert err.domain == "frontdesk.dev"
    assert err.error_metadata == {"kind": "conversation"}
    assert err.retry_delay == pytest.approx(0.3)
    assert err.retryable
    assert any(isinstance(d, error_details_pb2.RetryInfo) for d in err.details)
    assert "retry after 0.3s" in str(err)


def test_idempotent_call_waits_the_server_delay(fake: Fake) -> None:
    fake.start_failures = 2
    with FrontdeskClient(fake.addr, retry=FAST) as client:  # type: ignore[attr-defined]
        started = time.monotonic()
        response = client.start_conversation(idempotency_key="k1")
        elapsed = time.monotonic() - started
    assert response.conversation.conversation_id == "c1"
    assert len(fake.start_calls) == 3
    gaps = [b - a for a, b in zip(fake.start_calls, fake.start_calls[1:])]
    # the RetryInfo delay (0.3s), not the policy's 10-20ms backoff
    assert all(gap >= 0.28 for gap in gaps), gaps
    assert elapsed >= 0.58


def test_backoff_without_retry_info(fake: Fake) -> None:
    fake.start_failures = 2
    fake.delay = None
    with FrontdeskClient(fake.addr, retry=FAST) as client:  # type: ignore[attr-defined]
        started = time.monotonic()
        client.start_conversation(idempotency_key="k1")
        assert time.monotonic() - started < 0.5
    assert len(fake.start_calls) == 3


def test_non_idempotent_call_is_not_retried(fake: Fake) -> None:
    fake.start_failures = 1
    with FrontdeskClient(fake.addr, retry=FAST) as client:  # type: ignore[attr-defined]
        with pytest.raises(FrontdeskError) as info:
            client.start_conversation()
    assert info.value.code == grpc.StatusCode.ABORTED
    assert len(fake.start_calls) == 1


def test_retries_switched_off(fake: Fake) -> None:
    fake.start_failures = 1
    with FrontdeskClient(fake.addr, retry=False) as client:  # type: ignore[attr-defined]
        with pytest.raises(FrontdeskError):
            client.start_conversation(idempotency_key="k1")
    assert len(fake.start_calls) == 1


def test_attempts_are_bounded(fake: Fake) -> None:
    fake.start_failures = 10
    fake.delay = 0.01
    policy = RetryPolicy(max_attempts=3)
    with FrontdeskClient(fake.addr, retry=policy) as client:  # type: ignore[attr-defined]
        with pytest.raises(FrontdeskError) as info:
            client.start_conversation(idempotency_key="k1")
    assert info.value.code == grpc.StatusCode.ABORTED
    assert len(fake.start_calls) == 3


def ids(items: List[Any]) -> List[Any]:
    return [
        i.event_id if isinstance(i, common_pb2.RunEvent) else type(i).__name__ for i in items
    ]


WANT = [1, 2, 3, 4, 5, "TurnResult"]


def test_broken_stream_reattaches_with_subscribe_run(fake: Fake) -> None:
    fake.break_after = 3
    with FrontdeskClient(fake.addr, retry=FAST) as client:  # type: ignore[attr-defined]
        stream = client.send_message("c1", "hi", idempotency_key="k1")
        items = list(stream)
    assert ids(items) == WANT
    assert fake.subscribe_calls == [3]
    # SubscribeRun yields no result: the call is re-issued with its key for the recorded one,
    # and the events it streams again are dropped.
    assert fake.send_calls == 2
    assert stream.reattaches == 1
    assert ids(stream.events) == WANT[:-1]


def test_broken_stream_falls_back_to_the_call(fake: Fake) -> None:
    fake.break_after = 2
    fake.subscribe_not_found = True
    with FrontdeskClient(fake.addr, retry=FAST) as client:  # type: ignore[attr-defined]
        items = list(client.send_message("c1", "hi", idempotency_key="k1"))
    assert ids(items) == WANT
    assert fake.subscribe_calls == [2]
    assert fake.send_calls == 2


def test_fallback_to_the_call_waits_the_retry_info(fake: Fake) -> None:
    # The stream broke (its replica died) and SubscribeRun cannot find the run elsewhere; the
    # call re-issued with its key is ABORTED THREAD_BUSY with RetryInfo until the run is taken
    # over. Every re-issue waits at least that delay and counts against max_attempts.
    fake.break_after = 2
    fake.subscribe_not_found = True
    fake.busy_for = 0.3
    policy = RetryPolicy(max_attempts=5, initial_backoff=0.01, max_backoff=0.02)
    with FrontdeskClient(fake.addr, retry=policy) as client:  # type: ignore[attr-defined]
        started = time.monotonic()
        items = list(client.send_message("c1", "hi", idempotency_key="k1"))
        elapsed = time.monotonic() - started
    assert ids(items) == WANT
    assert elapsed >= 0.3
    assert fake.busy_times and fake.send_calls <= policy.max_attempts
    for at in fake.send_times:
        for busy in fake.busy_times:
            assert not 0 < at - busy < 0.28, (fake.send_times, fake.busy_times)


def test_fallback_to_the_call_counts_against_max_attempts(fake: Fake) -> None:
    fake.break_after = 2
    fake.subscribe_not_found = True
    fake.busy_for = 3600.0
    fake.delay = 0.02
    policy = RetryPolicy(max_attempts=3, initial_backoff=0.01)
    with FrontdeskClient(fake.addr, retry=policy) as client:  # type: ignore[attr-defined]
        with pytest.raises(FrontdeskError) as info:
            list(client.send_message("c1", "hi", idempotency_key="k1"))
    assert info.value.code == grpc.StatusCode.ABORTED and info.value.reason == "THREAD_BUSY"
    assert fake.send_calls == 3, fake.subscribe_calls


def test_run_failed_through_subscribe_run_keeps_reason_and_domain(fake: Fake) -> None:
    fake.break_after = 2
    fake.run_fails = True
    with FrontdeskClient(fake.addr, retry=FAST) as client:  # type: ignore[attr-defined]
        stream = client.send_message("c1", "hi", idempotency_key="k1")
        with pytest.raises(FrontdeskError) as info:
            list(stream)
    err = info.value
    assert err.code == grpc.StatusCode.FAILED_PRECONDITION
    assert err.message == "the conversation has ended"
    assert err.reason == "CONVERSATION_ENDED"
    assert err.domain == "frontdesk.dev"
    assert ids(stream.events) == [1, 2, 3, 4, 5]
    assert fake.subscribe_calls == [2] and fake.send_calls == 1


def test_broken_stream_without_reattach_reissues_the_call(fake: Fake) -> None:
    fake.break_after = 2
    policy = RetryPolicy(initial_backoff=0.01, max_backoff=0.02, reattach=False)
    with FrontdeskClient(fake.addr, retry=policy) as client:  # type: ignore[attr-defined]
        items = list(client.send_message("c1", "hi", idempotency_key="k1"))
    assert ids(items) == WANT
    assert fake.subscribe_calls == []
    assert fake.send_calls == 2


def test_broken_stream_without_key_raises(fake: Fake) -> None:
    fake.break_after = 2
    with FrontdeskClient(fake.addr, retry=FAST) as client:  # type: ignore[attr-defined]
        stream = client.send_message("c1", "hi")
        with pytest.raises(FrontdeskError) as info:
            list(stream)
    assert info.value.code == grpc.StatusCode.UNAVAILABLE
    assert ids(stream.events) == [1, 2]
    assert fake.send_calls == 1 and fake.subscribe_calls == []


def test_broken_stream_with_retries_off_raises(fake: Fake) -> None:
    fake.break_after = 2
    with FrontdeskClient(fake.addr, retry=False) as client:  # type: ignore[attr-defined]
        with pytest.raises(FrontdeskError):
            list(client.send_message("c1", "hi", idempotency_key="k1"))
    assert fake.send_calls == 1 and fake.subscribe_calls == []


def test_subscribe_run(fake: Fake) -> None:
    with FrontdeskClient(fake.addr) as client:  # type: ignore[attr-defined]
        events = list(client.subscribe_run(RUN, after_event_id=2))
    assert [e.event_id for e in events] == [3, 4, 5]


def test_async_retry_and_reattach(fake: Fake) -> None:
    fake.start_failures = 1
    fake.break_after = 3

    async def main() -> None:
        async with AsyncFrontdeskClient(fake.addr, retry=FAST) as client:  # type: ignore[attr-defined]
            started = time.monotonic()
            await client.start_conversation(idempotency_key="k1")
            assert time.monotonic() - started >= 0.28
            items = [item async for item in client.send_message("c1", "hi", idempotency_key="k2")]
            assert ids(items) == WANT
            assert [e.event_id async for e in client.subscribe_run(RUN, 4)] == [5]

    asyncio.run(main())
    assert len(fake.start_calls) == 2
    assert fake.subscribe_calls[0] == 3
    assert fake.send_calls == 2


def test_async_subscribe_run_raises_cancelled_after_cancel(fake: Fake) -> None:
    async def main() -> None:
        async with AsyncFrontdeskClient(fake.addr) as client:  # type: ignore[attr-defined]
            stream = client.subscribe_run(RUN)
            # the fake sends all five at once; the helper lets them arrive before it cancels
            stopped = await cancel_inside_loop(stream)
            assert stopped.code == grpc.StatusCode.CANCELLED
            assert [e.event_id for e in stream.events] == [1]
            with pytest.raises(FrontdeskError):
                await stream.__anext__()

    asyncio.run(main())


def test_async_subscribe_run_lets_a_task_cancellation_through(fake: Fake) -> None:
    fake.subscribe_holds = True

    async def main() -> None:
        async with AsyncFrontdeskClient(fake.addr) as client:  # type: ignore[attr-defined]
            stream = client.subscribe_run(RUN)
            task = asyncio.create_task(asyncio.wait_for(collect(stream), 10))
            while len(stream.events) < LAST:
                await asyncio.sleep(0.01)
            task.cancel()
            with pytest.raises(asyncio.CancelledError):
                await task

    async def collect(stream: Any) -> List[Any]:
        return [e async for e in stream]

    asyncio.run(main())


def test_async_non_idempotent_not_retried(fake: Fake) -> None:
    fake.start_failures = 1

    async def main() -> None:
        async with AsyncFrontdeskClient(fake.addr, retry=FAST) as client:  # type: ignore[attr-defined]
            with pytest.raises(FrontdeskError) as info:
                await client.start_conversation()
            assert info.value.retry_delay == pytest.approx(0.3)

    asyncio.run(main())
    assert len(fake.start_calls) == 1
