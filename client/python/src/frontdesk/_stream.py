"""What the blocking and the asyncio streams of a workflow call share: the bookkeeping of
retrying the call and re-attaching to its run, and the outcome ``result()`` returns. How a
stream waits (threads or asyncio) stays with each client; what a call's responses carry stays
with its progress class in ``_common``."""

from __future__ import annotations

from typing import Any, Optional

from frontdesk._errors import FrontdeskError
from frontdesk._retry import Plan, Resumer, deadline_of
from frontdesk.v1 import common_pb2, triage_pb2, workflow_pb2


class RunStreamCore:
    """A streaming call that runs a workflow, in either client. With an idempotency key (and
    retries on) a failed call is made again and a broken stream re-attached with SubscribeRun;
    each event is delivered once. The progress class mixed in before this one names the call
    (``_what``, ``_result_type``) and says how its responses unpack (``_unpack``) and where
    each item goes (``_record``)."""

    _what = ""
    _result_type: type = type(None)

    def __init__(self, client: Any, method: Any, request: Any, timeout: Optional[float]) -> None:
        self._client = client
        self._method = method
        self._request = request
        policy = client._retry if request.idempotency_key else None
        self._resumer = Resumer(policy, deadline_of(timeout), self._what)
        self._cancelled = False
        self._done = False
        self._final: Any = None
        # The error that ended the stream, kept so that result() after the error was raised
        # (by iterating, or by an earlier result()) raises it again, not a vaguer one.
        self._error: Optional[FrontdeskError] = None
        self._call: Any = self._open(Plan("call"))

    @property
    def attempts(self) -> int:
        """How many times the call was made (1 unless it was retried or its result fetched
        again after re-attaching)."""
        return self._resumer.budget.calls

    @property
    def reattaches(self) -> int:
        """How many times the stream re-attached to its run with SubscribeRun."""
        return self._resumer.budget.reattaches

    @property
    def skipped_events(self) -> int:
        """Events the server no longer held when the stream re-attached (0 normally)."""
        return self._resumer.skipped

    def _open(self, plan: Plan) -> Any:
        budget = self._resumer.budget
        metadata = self._client._metadata
        if plan.action == "subscribe":
            request = workflow_pb2.SubscribeRunRequest(
                run_id=plan.run_id, after_event_id=plan.after_event_id
            )
            return self._client.workflows.SubscribeRun(
                request, timeout=budget.timeout(), metadata=metadata
            )
        return self._method(self._request, timeout=budget.timeout(), metadata=metadata)

    def _accept(self, response: Any) -> Any:
        """The item of ``response`` to hand out, or None (nothing new for the caller)."""
        resumer = self._resumer
        if resumer.mode == "subscribe":
            resumer.skipped += response.skipped
            if not response.HasField("event"):
                return None
            return response.event if resumer.event(response.event) else None
        item = self._unpack(response)
        if item is None:
            return None
        if isinstance(item, common_pb2.RunEvent):
            return item if resumer.event(item) else None
        if isinstance(item, self._result_type):
            return item
        if isinstance(item, triage_pb2.TicketResolution):
            return item if resumer.resolution() else None
        return item if resumer.derived() else None

    def _deliver(self, item: Any) -> Any:
        """Records ``item`` (the call's result too) and returns it to hand out."""
        if isinstance(item, self._result_type):
            self._final = item
        self._record(item)
        return item

    def _end(self, error: FrontdeskError) -> FrontdeskError:
        """Ends the stream with ``error``, which the caller raises now and result() again."""
        self._done = True
        self._error = error
        return error

    def _outcome(self) -> Any:
        """Once the stream has ended: the call's result, or the error that ended it (a
        stream ends either with its result or with an error)."""
        if self._error is not None:
            raise self._error
        return self._final

    def _unpack(self, response: Any) -> Any:  # pragma: no cover - from the progress class
        raise NotImplementedError

    def _record(self, item: Any) -> None:  # pragma: no cover - from the progress class
        raise NotImplementedError
