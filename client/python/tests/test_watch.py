"""watch_investigation watching again after UNAVAILABLE, in both clients, against an in-process
fake InvestigationService whose watches end as each test scripts them."""

from __future__ import annotations

import asyncio
import threading
import time
from concurrent import futures
from typing import Any, Iterator, List, Optional, Tuple

import grpc
import pytest

from frontdesk import AsyncFrontdeskClient, FrontdeskClient, FrontdeskError, RetryPolicy
from frontdesk._retry import RetryOption
from frontdesk.v1 import investigation_pb2, investigation_pb2_grpc

from test_retry import FAST, fail

#: The fake's trail: seqs 1..LAST, the last the advisory report's status change.
LAST = 5


class WatchFake(investigation_pb2_grpc.InvestigationServiceServicer):
    """Ends the first ``cuts`` watches after ``cut_after`` entries (counted from after_seq)
    with ``cut`` (code, reason or None for no details, RetryInfo delay or None), and every
    watch with ``cut`` before it sends seq ``stuck_at`` (0: never), as a server that keeps
    failing; every watch after the first starts ``overlap`` entries at or below its after_seq."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.asked: List[int] = []
        self.called: List[float] = []
        self.cuts = 1
        self.cut_after = 2
        self.cut: Tuple[grpc.StatusCode, Optional[str], Optional[float]] = (
            grpc.StatusCode.UNAVAILABLE,
            "SHUTTING_DOWN",
            0.2,
        )
        self.stuck_at = 0
        self.overlap = 0

    def WatchInvestigation(self, request: Any, context: grpc.ServicerContext) -> Iterator[Any]:
        with self.lock:
            self.asked.append(request.after_seq)
            self.called.append(time.monotonic())
            n = len(self.asked)
        start = request.after_seq + 1
        if n > 1:
            start -= min(self.overlap, request.after_seq)
        for sent, seq in enumerate(range(start, LAST + 1)):
            if (n <= self.cuts and sent == self.cut_after) or 0 < self.stuck_at <= seq:
                code, reason, delay = self.cut
                if reason is None:
                    context.abort(code, "connection reset")  # no details, as a broken connection
                fail(context, code, reason, delay)
            entry = investigation_pb2.AuditEntry(investigation_id="INV-1", seq=seq)
            if seq == LAST:
                entry.status_change.to = (
                    investigation_pb2.INVESTIGATION_STATUS_ADVISORY_REPORT_GENERATED
                )
            yield investigation_pb2.WatchInvestigationResponse(entry=entry)


@pytest.fixture
def fake() -> Iterator[WatchFake]:
    servicer = WatchFake()
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=4))
    investigation_pb2_grpc.add_InvestigationServiceServicer_to_server(servicer, server)
    port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    servicer.addr = f"127.0.0.1:{port}"  # type: ignore[attr-defined]
    yield servicer
    server.stop(None)


def watch(
    fake: WatchFake, retry: RetryOption = FAST, after_seq: int = 0
) -> Tuple[List[int], Optional[FrontdeskError]]:
    """The seqs the blocking client's watch delivered, and the error that ended it."""
    with FrontdeskClient(fake.addr, retry=retry) as client:  # type: ignore[attr-defined]
        stream = client.watch_investigation("INV-1", after_seq, timeout=10)
        try:
            for _ in stream:
                pass
        except FrontdeskError as e:
            return [e.seq for e in stream.entries], e
        return [e.seq for e in stream.entries], None


def watch_async(
    fake: WatchFake, retry: RetryOption = FAST, after_seq: int = 0
) -> Tuple[List[int], Optional[FrontdeskError]]:
    """As watch(), with the asyncio client."""

    async def main() -> Tuple[List[int], Optional[FrontdeskError]]:
        async with AsyncFrontdeskClient(fake.addr, retry=retry) as client:  # type: ignore[attr-defined]
            stream = client.watch_investigation("INV-1", after_seq, timeout=10)
            try:
                async for _ in stream:
                    pass
            except FrontdeskError as e:
                return [e.seq for e in stream.entries], e
            return [e.seq for e in stream.entries], None

    return asyncio.run(main())


BOTH = pytest.mark.parametrize("run", [watch, watch_async], ids=["blocking", "asyncio"])


@BOTH
def test_watch_resumes_from_the_last_seq_after_shutting_down(fake: WatchFake, run: Any) -> None:
    started = time.monotonic()
    seqs, err = run(fake)
    assert err is None
    assert seqs == [1, 2, 3, 4, 5]
    assert fake.asked == [0, 2]
    # the RetryInfo delay (0.2s), not the policy's 10-20ms backoff, and no more
    assert fake.called[1] - fake.called[0] >= 0.19
    assert time.monotonic() - started < 2


@BOTH
def test_watch_delivers_no_entry_twice_when_the_server_repeats_one(
    fake: WatchFake, run: Any
) -> None:
    fake.cut = (grpc.StatusCode.UNAVAILABLE, "SHUTTING_DOWN", 0.01)
    fake.overlap = 2
    seqs, err = run(fake)
    assert err is None and seqs == [1, 2, 3, 4, 5]


def test_watch_resumes_from_after_seq_when_cut_before_any_entry(fake: WatchFake) -> None:
    fake.cut_after = 0
    seqs, err = watch(fake, after_seq=3)
    assert err is None and seqs == [4, 5]
    assert fake.asked == [3, 3]


def test_watch_resumes_after_a_broken_connection_with_the_backoff(fake: WatchFake) -> None:
    fake.cuts, fake.cut_after = 2, 1
    fake.cut = (grpc.StatusCode.UNAVAILABLE, None, None)
    started = time.monotonic()
    seqs, err = watch(fake)
    assert err is None and seqs == [1, 2, 3, 4, 5]
    assert fake.asked == [0, 1, 2]
    assert time.monotonic() - started < 0.5


@BOTH
def test_watch_with_retries_off_raises_shutting_down(fake: WatchFake, run: Any) -> None:
    # the same cut resumes under the policy ...
    seqs, err = run(fake)
    assert err is None and seqs == [1, 2, 3, 4, 5] and len(fake.asked) == 2
    # ... and is raised with it off
    fake.asked.clear()
    seqs, err = run(fake, retry=False)
    assert err is not None
    assert err.code == grpc.StatusCode.UNAVAILABLE and err.reason == "SHUTTING_DOWN"
    assert seqs == [1, 2] and len(fake.asked) == 1


@BOTH
@pytest.mark.parametrize(
    "code",
    [grpc.StatusCode.INTERNAL, grpc.StatusCode.ABORTED, grpc.StatusCode.NOT_FOUND],
    ids=lambda c: c.name,
)
def test_watch_raises_other_errors(fake: WatchFake, run: Any, code: grpc.StatusCode) -> None:
    # UNAVAILABLE resumes; the same cut with another code (ABORTED included, which keyed
    # calls retry) is raised
    fake.cut = (grpc.StatusCode.UNAVAILABLE, "SCRIPTED", 0.01)
    seqs, err = run(fake)
    assert err is None and seqs == [1, 2, 3, 4, 5] and len(fake.asked) == 2
    fake.asked.clear()
    fake.cut = (code, "SCRIPTED", 0.01)
    seqs, err = run(fake)
    assert err is not None and err.code == code
    assert seqs == [1, 2] and len(fake.asked) == 1


@BOTH
def test_watch_budget_starts_afresh_after_each_entry(fake: WatchFake, run: Any) -> None:
    # four cuts, each after one new entry, under two attempts: a watch outlives many restarts
    fake.cuts, fake.cut_after = 4, 1
    fake.cut = (grpc.StatusCode.UNAVAILABLE, "SHUTTING_DOWN", 0.01)
    seqs, err = run(fake, retry=RetryPolicy(max_attempts=2))
    assert err is None and seqs == [1, 2, 3, 4, 5]
    assert fake.asked == [0, 1, 2, 3, 4]


@BOTH
def test_watch_wait_starts_afresh_after_each_entry(fake: WatchFake, run: Any) -> None:
    # four 0.1s waits, each after a new entry, under 0.15s of waiting
    fake.cuts, fake.cut_after = 4, 1
    fake.cut = (grpc.StatusCode.UNAVAILABLE, "SHUTTING_DOWN", 0.1)
    seqs, err = run(fake, retry=RetryPolicy(max_wait=0.15))
    assert err is None and seqs == [1, 2, 3, 4, 5]
    assert len(fake.asked) == 5


def test_attempts_count_every_watch_made(fake: WatchFake) -> None:
    fake.cuts, fake.cut_after = 4, 1
    fake.cut = (grpc.StatusCode.UNAVAILABLE, "SHUTTING_DOWN", 0.01)
    policy = RetryPolicy(max_attempts=2)
    with FrontdeskClient(fake.addr, retry=policy) as client:  # type: ignore[attr-defined]
        stream = client.watch_investigation("INV-1", timeout=10)
        assert [e.seq for e in stream] == [1, 2, 3, 4, 5]
        assert stream.attempts == 5


@BOTH
def test_watch_resumes_within_max_attempts(fake: WatchFake, run: Any) -> None:
    # failures in a row, with no entry between them, are bounded: counted from the last entry
    fake.cuts, fake.cut_after, fake.stuck_at = 2, 1, 4
    fake.cut = (grpc.StatusCode.UNAVAILABLE, "SHUTTING_DOWN", 0.01)
    seqs, err = run(fake, retry=RetryPolicy(max_attempts=3))
    assert err is not None and err.code == grpc.StatusCode.UNAVAILABLE
    assert seqs == [1, 2, 3]
    assert fake.asked == [0, 1, 2, 3, 3]


def test_watch_resumes_within_max_wait(fake: WatchFake) -> None:
    fake.cuts, fake.cut_after, fake.stuck_at = 1, 1, 3
    # one 0.2s wait after each entry fits in 0.3s, two in a row do not
    seqs, err = watch(fake, retry=RetryPolicy(max_wait=0.3))
    assert err is not None and err.reason == "SHUTTING_DOWN"
    assert seqs == [1, 2]
    assert fake.asked == [0, 1, 2]


def test_cancel_stops_the_wait_before_watching_again(fake: WatchFake) -> None:
    fake.cut = (grpc.StatusCode.UNAVAILABLE, "SHUTTING_DOWN", 5.0)
    with FrontdeskClient(fake.addr, retry=FAST) as client:  # type: ignore[attr-defined]
        stream = client.watch_investigation("INV-1")
        assert [next(stream).seq, next(stream).seq] == [1, 2]
        threading.Timer(0.2, stream.cancel).start()
        started = time.monotonic()
        with pytest.raises(FrontdeskError) as info:
            next(stream)
    assert info.value.code == grpc.StatusCode.CANCELLED
    assert time.monotonic() - started < 2
    assert len(fake.asked) == 1
