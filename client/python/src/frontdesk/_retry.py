"""Retrying idempotent calls and re-attaching broken streams: the policy and the bookkeeping,
shared by the blocking and the asyncio client (which do the waiting and the calling)."""

from __future__ import annotations

import random
import time
from dataclasses import dataclass
from typing import Any, Dict, Optional, Tuple, Union

import grpc

from frontdesk._errors import FrontdeskError
from frontdesk.v1 import common_pb2

#: Status codes a call with an idempotency key is retried on: UNAVAILABLE (the server, the
#: model, the store or a dependency is unavailable; the connection broke) and ABORTED
#: (THREAD_BUSY, CHECKPOINT_CONFLICT). Every other code is final.
RETRYABLE_CODES = frozenset({grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.ABORTED})

#: The kinds of the events a run's event stream ends with.
TERMINAL_EVENTS = frozenset({"run_finished", "run_failed", "run_interrupted"})


@dataclass(frozen=True)
class RetryPolicy:
    """How a client retries calls that carry an idempotency key, and re-attaches their broken
    streams; a WatchInvestigation cut with UNAVAILABLE is watched again under it too.
    ``FrontdeskClient(retry=False)`` turns all that off; ``retry=RetryPolicy(...)`` tunes.

    ``max_attempts``: the most times one call is made, the first included (a stream also
    re-attaches at most this many times; a watch is made at most this many times in a row
    without an entry between). ``max_wait``: the most seconds one call spends waiting between
    attempts, all waits together (for a watch, those since its last entry).
    ``initial_backoff`` and ``max_backoff``: the wait, in seconds, when the server's error
    carries no RetryInfo delay: ``initial_backoff`` doubling with each attempt up to
    ``max_backoff``, each wait a random 50-100% of that (jitter). ``reattach``: re-attach a
    broken stream with WorkflowService/SubscribeRun (else the call itself is retried)."""

    max_attempts: int = 5
    max_wait: float = 30.0
    initial_backoff: float = 0.25
    max_backoff: float = 5.0
    reattach: bool = True

    def __post_init__(self) -> None:
        if self.max_attempts < 1:
            raise ValueError("max_attempts must be at least 1")
        if self.max_wait < 0 or self.initial_backoff < 0 or self.max_backoff < 0:
            raise ValueError("max_wait, initial_backoff and max_backoff must not be negative")

    def backoff(self, retry: int) -> float:
        """The wait before retry number ``retry`` (1 for the first) without server advice."""
        ceiling = min(self.max_backoff, self.initial_backoff * (2 ** max(0, retry - 1)))
        return ceiling * random.uniform(0.5, 1.0)


RetryOption = Union[bool, RetryPolicy, None]


def resolve_policy(retry: RetryOption) -> Optional[RetryPolicy]:
    """``True``/``None``: the default policy; ``False``: none; a RetryPolicy: itself."""
    if retry is None or retry is True:
        return RetryPolicy()
    if retry is False:
        return None
    if isinstance(retry, RetryPolicy):
        return retry
    raise TypeError(f"retry must be a bool or a RetryPolicy, not {type(retry).__name__}")


class Budget:
    """One call's attempts and waits so far, against its policy and its deadline (a
    ``time.monotonic()`` value, or None)."""

    def __init__(self, policy: Optional[RetryPolicy], deadline: Optional[float]) -> None:
        self.policy = policy
        self.deadline = deadline
        self.calls = 1
        self.reattaches = 0
        self.waited = 0.0

    def delay(self, err: FrontdeskError) -> Optional[float]:
        """The wait before calling again after ``err``; None when ``err`` is final: no policy,
        a code that is not retried, or the attempts, the waiting time or the deadline used up."""
        policy = self.policy
        if policy is None or err.code not in RETRYABLE_CODES:
            return None
        if self.calls >= policy.max_attempts:
            return None
        wait = err.retry_delay if err.retry_delay is not None else policy.backoff(self.calls)
        if self.waited + wait > policy.max_wait:
            return None
        if self.deadline is not None and time.monotonic() + wait >= self.deadline:
            return None
        return wait

    def can_reattach(self) -> bool:
        policy = self.policy
        return policy is not None and policy.reattach and self.reattaches < policy.max_attempts

    def timeout(self) -> Optional[float]:
        """What is left of the deadline, for the next attempt (None: no deadline)."""
        if self.deadline is None:
            return None
        return max(0.0, self.deadline - time.monotonic())


def deadline_of(timeout: Optional[float]) -> Optional[float]:
    return None if timeout is None else time.monotonic() + timeout


@dataclass
class Plan:
    """What a stream does next: ``"call"`` the original call again after ``delay`` seconds,
    ``"subscribe"`` to the run (SubscribeRun from ``after_event_id``), or ``"raise"`` ``error``."""

    action: str
    delay: float = 0.0
    error: Optional[FrontdeskError] = None
    run_id: str = ""
    after_event_id: int = 0


class Resumer:
    """A streaming call's bookkeeping across attempts: which events the caller has seen (by run
    id and event id, told apart from a later execution of the same run by the event's time),
    the run in progress, and what to do when a source (the call, or SubscribeRun) fails or ends
    without the call's result.

    ``policy`` is None when the call is not retried (retries off, or no idempotency key)."""

    def __init__(self, policy: Optional[RetryPolicy], deadline: Optional[float], what: str) -> None:
        self.budget = Budget(policy, deadline)
        self.what = what
        self.mode = "call"
        # (run id, event id) -> the event's time: an event seen again with another time belongs
        # to a later execution of the run (resumed after a crash, or by another replica).
        self._seen: Dict[Tuple[str, int], Tuple[int, int]] = {}
        self._ended: Dict[str, common_pb2.RunEvent] = {}
        self._last_dup = False
        self._resolution = False
        self.run_id = ""
        self.event_id = 0
        # The failure that took the stream from the call to SubscribeRun (the call's error, or
        # its ending without its result): what a fallback to the call waits on, or raises.
        self._cause: Optional[FrontdeskError] = None
        #: Events the server no longer held when the stream re-attached (SubscribeRun.skipped).
        self.skipped = 0

    # -- what the caller sees ---------------------------------------------------------------
    def event(self, event: common_pb2.RunEvent) -> bool:
        """True when the caller has not seen ``event`` yet (and records it)."""
        key = (event.run_id, event.event_id)
        stamp = (event.time.seconds, event.time.nanos)
        seen = self._seen.get(key)
        if seen is not None and seen == stamp:
            self._last_dup = True
            return False
        if seen is not None:
            # A new execution of the run: its events count again from 1.
            for k in [k for k in self._seen if k[0] == event.run_id]:
                del self._seen[k]
            self._ended.pop(event.run_id, None)
        self._seen[key] = stamp
        self._last_dup = False
        self.run_id, self.event_id = event.run_id, event.event_id
        if event.WhichOneof("kind") in TERMINAL_EVENTS:
            self._ended[event.run_id] = event
        return True

    def derived(self) -> bool:
        """True for an item derived from the last event (an agent message, a plan, ...) unless
        that event was one the caller had seen: then so was the item."""
        return not self._last_dup

    def resolution(self) -> bool:
        """True for the first TicketResolution of a triage, False for a replayed one."""
        if self._resolution:
            return False
        self._resolution = True
        return True

    @property
    def open_run(self) -> str:
        """The run whose events are streaming and whose last event has not arrived ("" if none)."""
        return self.run_id if self.run_id and self.run_id not in self._ended else ""

    # -- what to do next --------------------------------------------------------------------
    def failed(self, err: FrontdeskError) -> Plan:
        """The source failed with ``err``."""
        budget = self.budget
        if self.mode == "subscribe":
            return self._fall_back(err)
        if budget.policy is None:
            return Plan("raise", error=err)
        if err.code in RETRYABLE_CODES and self.open_run and budget.can_reattach():
            return self._subscribe(err)
        return self._retry(err)

    def ended(self) -> Plan:
        """The source ended without the call's result."""
        budget = self.budget
        if self.mode == "subscribe":
            if self.open_run:
                # ended before the run's last event: re-attach again, or fall back to the call
                if budget.can_reattach():
                    return self._subscribe(self._cause)
                return self._fall_back(None)
            last = self._ended.get(self.run_id)
            if last is not None and last.WhichOneof("kind") == "run_failed":
                return self._retry(run_failed_error(last))
            # The run ended: the call with its key replays the recorded outcome, at once (nothing
            # failed), as one of the max_attempts calls.
            assert budget.policy is not None and self._cause is not None
            if budget.calls >= budget.policy.max_attempts:
                return Plan("raise", error=self._cause)
            return self._call(0.0)
        err = FrontdeskError(
            grpc.StatusCode.INTERNAL, f"{self.what} stream ended without its result"
        )
        if budget.policy is None:
            return Plan("raise", error=err)
        if self.open_run and budget.can_reattach():
            return self._subscribe(err)
        broken = FrontdeskError(grpc.StatusCode.UNAVAILABLE, err.message)
        wait = budget.delay(broken)
        return self._call(wait) if wait is not None else Plan("raise", error=err)

    def _retry(self, err: FrontdeskError) -> Plan:
        """The call again after the wait ``err`` asks for (its RetryInfo, else the backoff),
        counted against max_attempts; or raise ``err`` when it is final."""
        wait = self.budget.delay(err)
        return self._call(wait) if wait is not None else Plan("raise", error=err)

    def _fall_back(self, sub_err: Optional[FrontdeskError]) -> Plan:
        """The call again when SubscribeRun could not follow the run (``sub_err``: NOT_FOUND,
        another replica has it or this one forgot it; UNAVAILABLE, it is down; None: it ended
        before the run's last event, with no re-attach left); with its key the call attaches or
        replays. It waits what the failure that left the call asks for (its RetryInfo, else the
        backoff), or ``sub_err``'s RetryInfo when that is longer, and counts against
        max_attempts; else that failure is raised."""
        cause = self._cause
        assert cause is not None
        asked = cause
        if asked.code not in RETRYABLE_CODES:
            # the call's stream ended without its result: broken, like UNAVAILABLE
            asked = FrontdeskError(grpc.StatusCode.UNAVAILABLE, cause.message)
        if (
            sub_err is not None
            and sub_err.code in RETRYABLE_CODES
            and sub_err.retry_delay is not None
            and (asked.retry_delay is None or sub_err.retry_delay > asked.retry_delay)
        ):
            asked = sub_err
        wait = self.budget.delay(asked)
        return self._call(wait) if wait is not None else Plan("raise", error=cause)

    def _call(self, wait: Optional[float]) -> Plan:
        self.mode = "call"
        self.budget.calls += 1
        self.budget.waited += wait or 0.0
        return Plan("call", delay=wait or 0.0)

    def _subscribe(self, cause: Optional[FrontdeskError]) -> Plan:
        """SubscribeRun at once, because of ``cause``."""
        self.mode = "subscribe"
        self.budget.reattaches += 1
        self._cause = cause
        return Plan("subscribe", run_id=self.run_id, after_event_id=self.event_id)


class WatchResumer:
    """A WatchInvestigation's bookkeeping across its calls: the last seq delivered, and whether
    a failure is watched again. The watch only reads the trail and asks again from the last seq
    delivered, so it resumes without an idempotency key: on UNAVAILABLE of any reason (a server
    shutting down, SHUTTING_DOWN, or a broken connection), after the RetryInfo delay or the
    backoff, within the policy's attempts and waiting in a row (counted afresh after each entry
    delivered) and the watch's deadline."""

    def __init__(
        self, policy: Optional[RetryPolicy], deadline: Optional[float], after_seq: int
    ) -> None:
        self.budget = Budget(policy, deadline)
        self.after_seq = after_seq
        #: How many times WatchInvestigation was called, over the whole watch.
        self.calls = 1

    def fresh(self, entry: Any) -> bool:
        """True for an entry the caller has not seen (and records it). A server may send one
        at or below the seq asked for; the caller must not see it twice."""
        if entry.seq <= self.after_seq:
            return False
        self.after_seq = entry.seq
        # A watch lives as long as its investigation (days, waiting on a manager's reply): a
        # budget over the whole watch would be used up by a few ordinary server restarts, so
        # only failures in a row count. The deadline still covers the whole watch.
        self.budget = Budget(self.budget.policy, self.budget.deadline)
        return True

    def failed(self, err: FrontdeskError) -> Optional[float]:
        """The wait before watching again after ``err`` (counted as one attempt), or None when
        ``err`` ends the watch."""
        if err.code != grpc.StatusCode.UNAVAILABLE:
            return None  # ABORTED too: retried for keyed calls, no reason to watch again
        wait = self.budget.delay(err)
        if wait is not None:
            self.calls += 1
            self.budget.calls += 1
            self.budget.waited += wait
        return wait


_CODES = {code.value[0]: code for code in grpc.StatusCode}


def run_failed_error(event: common_pb2.RunEvent) -> FrontdeskError:
    """The error a RunFailed event reports, as the call that ran it would have raised it."""
    failed = event.run_failed
    code = _CODES.get(failed.code, grpc.StatusCode.UNKNOWN)
    return FrontdeskError(
        code,
        failed.message,
        reason=failed.reason or None,
        domain="frontdesk.dev" if failed.reason else None,
    )


def is_event(item: Any) -> bool:
    return isinstance(item, common_pb2.RunEvent)
