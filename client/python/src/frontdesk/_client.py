"""FrontdeskClient: the blocking (thread-based) client."""

from __future__ import annotations

import threading
import time
from typing import Any, Iterator, List, Optional, Sequence, Tuple, Union

import grpc

from frontdesk import _auth
from frontdesk import _common as c
from frontdesk._errors import FrontdeskError
from frontdesk._retry import (
    Budget,
    Plan,
    RetryOption,
    WatchResumer,
    deadline_of,
    resolve_policy,
)
from frontdesk._stream import RunStreamCore
from frontdesk.v1 import (
    common_pb2,
    conversation_pb2,
    conversation_pb2_grpc,
    investigation_pb2,
    investigation_pb2_grpc,
    research_pb2,
    research_pb2_grpc,
    triage_pb2,
    triage_pb2_grpc,
    workflow_pb2,
    workflow_pb2_grpc,
)


class _RunStream(RunStreamCore):
    """The blocking machinery of a workflow call's stream: receiving, waiting between
    attempts on a thread, and ``result()``."""

    def __init__(
        self, client: "FrontdeskClient", method: Any, request: Any, timeout: Optional[float]
    ) -> None:
        self._wake = threading.Event()
        super().__init__(client, method, request, timeout)

    def cancel(self) -> None:
        """Stops the call, and any retry or re-attach (the run itself was committed when
        RunStarted arrived and finishes on the server)."""
        self._cancelled = True
        self._wake.set()
        self._call.cancel()

    def _follow(self, plan: Plan) -> None:
        if plan.action == "raise":
            assert plan.error is not None
            raise self._end(plan.error)
        if plan.delay > 0 and self._wake.wait(plan.delay):
            pass  # woken by cancel()
        if self._cancelled:
            raise self._end(FrontdeskError.cancelled_by_caller())
        self._call = self._open(plan)

    def _receive(self) -> Any:
        while True:
            if self._done:
                raise StopIteration
            try:
                response = next(self._call)
            except StopIteration:
                if self._final is not None:
                    self._done = True
                    raise
                self._follow(self._resumer.ended())
                continue
            except grpc.RpcError as e:
                if self._final is not None:
                    self._done = True
                    raise StopIteration from None
                err = FrontdeskError.from_rpc_error(e)
                if self._cancelled:
                    raise self._end(err) from None
                self._follow(self._resumer.failed(err))
                continue
            item = self._accept(response)
            if item is not None:
                return self._deliver(item)

    def _drain(self) -> Any:
        try:
            while True:
                self._receive()
        except StopIteration:
            pass
        return self._outcome()


class TurnStream(c.TurnProgress, _RunStream, Iterator[c.StreamItem]):
    """One SendMessage call: iterate it for each RunEvent as it arrives, then the TurnResult.

    ``result()`` drains what is left and returns the TurnResult; ``cancel()`` stops the call
    (the server finishes the run anyway: it was committed when RunStarted arrived).
    Errors, before or during the stream, raise FrontdeskError, and ``result()`` after one
    raises it again. With an idempotency key the call is retried, and a broken stream
    re-attached, as the client's retry policy says; each event is delivered once
    (``attempts`` and ``reattaches`` count what it took).
    """

    def __init__(self, client: "FrontdeskClient", request: Any, timeout: Optional[float]) -> None:
        c.TurnProgress.__init__(self)
        _RunStream.__init__(self, client, client.conversations.SendMessage, request, timeout)

    def __iter__(self) -> "TurnStream":
        return self

    def __next__(self) -> c.StreamItem:
        return self._receive()  # type: ignore[no-any-return]

    def result(self) -> conversation_pb2.TurnResult:
        """Consumes the rest of the stream and returns the turn's result."""
        return self._drain()  # type: ignore[no-any-return]

    def __enter__(self) -> "TurnStream":
        return self

    def __exit__(self, *exc: object) -> None:
        self.cancel()


class TriageStream(c.TriageProgress, _RunStream, Iterator[c.TriageItem]):
    """One TriageTicket call: iterate it for the matching run's events (when the customer has
    active tickets), the TicketResolution, each RunEvent of the ticket's run as it arrives, then
    the TriageResult.

    ``result()`` drains what is left and returns the TriageResult; ``resolution`` is the
    TicketResolution once it has arrived (None before); ``events`` the events seen so far;
    ``cancel()`` stops the call. Errors, before or during the stream, raise FrontdeskError.
    Retries and re-attaching as for a TurnStream (the resolution is delivered once).
    """

    def __init__(self, client: "FrontdeskClient", request: Any, timeout: Optional[float]) -> None:
        c.TriageProgress.__init__(self)
        _RunStream.__init__(self, client, client.triage.TriageTicket, request, timeout)

    def __iter__(self) -> "TriageStream":
        return self

    def __next__(self) -> c.TriageItem:
        return self._receive()  # type: ignore[no-any-return]

    def result(self) -> triage_pb2.TriageResult:
        """Consumes the rest of the stream and returns the triage result."""
        return self._drain()  # type: ignore[no-any-return]

    def __enter__(self) -> "TriageStream":
        return self

    def __exit__(self, *exc: object) -> None:
        self.cancel()


class InvestigationStream(c.InvestigationProgress, _RunStream, Iterator[c.InvestigationItem]):
    """One StartInvestigation or Respond call: iterate it for each RunEvent, AgentMessage and
    StatusChange as the run produces them (a message or status change right after the node
    event that produced it), then the Investigation as the run left it: finished, or awaiting
    a reply (``.awaiting``).

    ``result()`` drains what is left and returns the Investigation; ``events``, ``messages``
    and ``status_changes`` hold what arrived so far; ``cancel()`` stops the call. Errors,
    before or during the stream, raise FrontdeskError. Retries and re-attaching as for a
    TurnStream; while re-attached only RunEvents arrive (the Investigation holds every message
    and status change).
    """

    def __init__(
        self, client: "FrontdeskClient", method: Any, request: Any, timeout: Optional[float]
    ) -> None:
        c.InvestigationProgress.__init__(self)
        _RunStream.__init__(self, client, method, request, timeout)

    def __iter__(self) -> "InvestigationStream":
        return self

    def __next__(self) -> c.InvestigationItem:
        return self._receive()  # type: ignore[no-any-return]

    def result(self) -> investigation_pb2.Investigation:
        """Consumes the rest of the stream and returns the investigation."""
        return self._drain()  # type: ignore[no-any-return]

    def __enter__(self) -> "InvestigationStream":
        return self

    def __exit__(self, *exc: object) -> None:
        self.cancel()


class ResearchStream(c.ResearchProgress, _RunStream, Iterator[c.ResearchItem]):
    """One Ask call: iterate it for each RunEvent, OrchestratorMessage, Plan, ResearchResult,
    CriticVerdict and ExpertAnswer as the run produces them (each right after the node event
    that produced it), then the Research: its outcome, final answer and reasoning trace.

    ``result()`` drains what is left and returns the Research; ``events``, ``messages``,
    ``plans``, ``results``, ``critic_decisions`` and ``expert_answers`` hold what arrived so
    far; ``cancel()`` stops the call. Errors, before or during the stream, raise
    FrontdeskError. Retries and re-attaching as for a TurnStream; while re-attached only
    RunEvents arrive (the Research holds the plan, the results and the messages).
    """

    def __init__(self, client: "FrontdeskClient", request: Any, timeout: Optional[float]) -> None:
        c.ResearchProgress.__init__(self)
        _RunStream.__init__(self, client, client.research.Ask, request, timeout)

    def __iter__(self) -> "ResearchStream":
        return self

    def __next__(self) -> c.ResearchItem:
        return self._receive()  # type: ignore[no-any-return]

    def result(self) -> research_pb2.Research:
        """Consumes the rest of the stream and returns the research."""
        return self._drain()  # type: ignore[no-any-return]

    def __enter__(self) -> "ResearchStream":
        return self

    def __exit__(self, *exc: object) -> None:
        self.cancel()


class RunEventStream(Iterator[common_pb2.RunEvent]):
    """One SubscribeRun call: iterate it for the run's events after the event id given, then
    its live ones; it ends after the run's last event (run_finished, run_failed or
    run_interrupted). ``skipped`` counts the events the server no longer held; ``events``
    holds what arrived; ``cancel()`` stops the call. Errors raise FrontdeskError (NOT_FOUND
    for a run the server does not know). Never retried."""

    def __init__(self, call: Any) -> None:
        self._call = call
        self.events: List[common_pb2.RunEvent] = []
        self.skipped = 0

    def __iter__(self) -> "RunEventStream":
        return self

    def __next__(self) -> common_pb2.RunEvent:
        while True:
            try:
                response = next(self._call)
            except grpc.RpcError as e:
                raise FrontdeskError.from_rpc_error(e) from None
            self.skipped += response.skipped
            if not response.HasField("event"):
                continue
            self.events.append(response.event)
            return response.event

    def cancel(self) -> None:
        self._call.cancel()

    def __enter__(self) -> "RunEventStream":
        return self

    def __exit__(self, *exc: object) -> None:
        self.cancel()


class AuditStream(Iterator[investigation_pb2.AuditEntry]):
    """One WatchInvestigation: iterate it for each AuditEntry, the trail written so far first,
    then each new entry as it is written; it ends once the advisory report is generated.
    ``entries`` holds what arrived so far; ``cancel()`` stops the call (a watch of an
    investigation that waits for a reply otherwise waits with it). A call that fails with
    UNAVAILABLE (a server shutting down, reason SHUTTING_DOWN, or a broken connection) is made
    again from the last seq delivered, under the client's retry policy; each entry is delivered
    once. Other errors, and UNAVAILABLE with retries off or the policy's bounds used up, raise
    FrontdeskError.
    """

    def __init__(self, client: "FrontdeskClient", request: Any, timeout: Optional[float]) -> None:
        self._client = client
        self._investigation_id = request.investigation_id
        self._resumer = WatchResumer(client._retry, deadline_of(timeout), request.after_seq)
        self._cancelled = False
        self._wake = threading.Event()
        # The error that ended the watch: raised again rather than watching again.
        self._error: Optional[FrontdeskError] = None
        self.entries: List[investigation_pb2.AuditEntry] = []
        self._call: Any = self._open()

    @property
    def attempts(self) -> int:
        """How many times WatchInvestigation was called (1 unless the watch resumed)."""
        return self._resumer.calls

    def _open(self) -> Any:
        request = investigation_pb2.WatchInvestigationRequest(
            investigation_id=self._investigation_id, after_seq=self._resumer.after_seq
        )
        return self._client.investigations.WatchInvestigation(
            request, timeout=self._resumer.budget.timeout(), metadata=self._client._metadata
        )

    def __iter__(self) -> "AuditStream":
        return self

    def __next__(self) -> investigation_pb2.AuditEntry:
        while True:
            if self._error is not None:
                raise self._error
            try:
                response = next(self._call)
            except grpc.RpcError as e:
                err = FrontdeskError.from_rpc_error(e)
                wait = None if self._cancelled else self._resumer.failed(err)
                if wait is None:
                    self._error = err
                    raise err from None
                self._wake.wait(wait)  # cancel() wakes it
                if self._cancelled:
                    self._error = FrontdeskError.cancelled_by_caller()
                    raise self._error from None
                self._call = self._open()
                continue
            if not response.HasField("entry") or not self._resumer.fresh(response.entry):
                continue
            self.entries.append(response.entry)
            return response.entry

    def cancel(self) -> None:
        self._cancelled = True
        self._wake.set()
        self._call.cancel()

    def __enter__(self) -> "AuditStream":
        return self

    def __exit__(self, *exc: object) -> None:
        self.cancel()


class FrontdeskClient:
    """Blocking client for Frontdesk's ConversationService, TriageService,
    InvestigationService, ResearchService and WorkflowService.

    ``target`` is host:port. ``api_key`` (a key from ``frontdesk-server keys create``) is sent
    as ``authorization: Bearer <key>`` with every call, retries and re-attaching streams
    included; it never appears in the client's repr. ``tls``: False or omitted connects in
    plaintext, True over TLS trusting the system's roots, a ``TlsConfig`` with its CA, client
    certificate (mutual TLS) and server name; or pass any ``grpc.ChannelCredentials`` as
    ``credentials``. ``metadata`` is sent with every call, ``timeout`` is the default deadline
    in seconds for unary calls (streams have none unless given per call; a call's deadline
    covers its retries). ``retry`` is the retry policy of calls with an idempotency key, and of
    watch_investigation's resuming: True (the default ``RetryPolicy()``), a ``RetryPolicy``,
    or False (never retry, never re-attach, never watch again). Use as a context manager, or call close().

    A server that requires keys refuses a call without a valid one as UNAUTHENTICATED (reason
    ``UNAUTHENTICATED``), one whose key lacks the method's scope as PERMISSION_DENIED (reason
    ``SCOPE_MISSING``, ``error_metadata["scope"]`` naming it), and a tenant over a quota as
    RESOURCE_EXHAUSTED (reason ``QUOTA_EXCEEDED``, with ``retry_delay``). None of them is
    retried.
    """

    def __init__(
        self,
        target: str = c.DEFAULT_TARGET,
        *,
        api_key: Optional[str] = None,
        tls: _auth.TlsOption = None,
        credentials: Optional[grpc.ChannelCredentials] = None,
        metadata: Optional[c.Metadata] = None,
        timeout: Optional[float] = 30.0,
        options: Optional[Sequence[Tuple[str, Any]]] = None,
        channel: Optional[grpc.Channel] = None,
        retry: RetryOption = True,
    ) -> None:
        self._metadata = _auth.bearer_metadata(api_key, metadata)
        credentials, tls_options = _auth.resolve_tls(tls, credentials)
        if channel is None:
            options = [*(options or []), *tls_options]
            if credentials is None:
                channel = grpc.insecure_channel(target, options=options)
            else:
                channel = grpc.secure_channel(target, credentials, options=options)
            self._owns_channel = True
            self._target: Optional[str] = target
        else:
            self._owns_channel = False
            self._target = None
        self._tls = credentials is not None
        self.channel = channel
        self._timeout = timeout
        self._retry = resolve_policy(retry)
        self.conversations = conversation_pb2_grpc.ConversationServiceStub(channel)
        self.workflows = workflow_pb2_grpc.WorkflowServiceStub(channel)
        self.triage = triage_pb2_grpc.TriageServiceStub(channel)
        self.investigations = investigation_pb2_grpc.InvestigationServiceStub(channel)
        self.research = research_pb2_grpc.ResearchServiceStub(channel)

    def __repr__(self) -> str:
        return _auth.describe(type(self).__name__, self._target, self._tls, self._metadata)

    # -- lifecycle -------------------------------------------------------------------------
    def close(self) -> None:
        if self._owns_channel:
            self.channel.close()

    def __enter__(self) -> "FrontdeskClient":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _unary(self, method: Any, request: Any, timeout: Optional[float]) -> Any:
        """One unary call; retried per the retry policy when the request carries an
        idempotency key, within one deadline."""
        keyed = bool(getattr(request, "idempotency_key", ""))
        budget = Budget(
            self._retry if keyed else None,
            deadline_of(self._timeout if timeout is None else timeout),
        )
        while True:
            try:
                return method(request, timeout=budget.timeout(), metadata=self._metadata)
            except grpc.RpcError as e:
                err = FrontdeskError.from_rpc_error(e)
            wait = budget.delay(err)
            if wait is None:
                raise err
            budget.calls += 1
            budget.waited += wait
            time.sleep(wait)

    # -- ConversationService ---------------------------------------------------------------
    def start_conversation(
        self,
        workflow: str = "intake",
        *,
        conversation_id: Optional[str] = None,
        idempotency_key: Optional[str] = None,
        timeout: Optional[float] = None,
    ) -> conversation_pb2.StartConversationResponse:
        """Creates a conversation; the response has ``.conversation`` and ``.welcome``."""
        request = c.start_request(workflow, conversation_id, idempotency_key)
        return self._unary(self.conversations.StartConversation, request, timeout)

    def send_message(
        self,
        conversation_id: str,
        text: str,
        idempotency_key: Optional[str] = None,
        *,
        busy_policy: Optional[str] = None,
        timeout: Optional[float] = None,
    ) -> TurnStream:
        """Sends one user turn. Iterate the returned stream for RunEvents in order, then the
        TurnResult; or call ``.result()``. ``busy_policy`` is "reject" (default) or "queue"."""
        request = c.send_request(conversation_id, text, idempotency_key, busy_policy)
        return TurnStream(self, request, timeout)

    def get_conversation(
        self, conversation_id: str, *, timeout: Optional[float] = None
    ) -> conversation_pb2.GetConversationResponse:
        """The conversation (``.conversation``) and its history (``.messages``)."""
        request = conversation_pb2.GetConversationRequest(conversation_id=conversation_id)
        return self._unary(self.conversations.GetConversation, request, timeout)

    def list_conversations(
        self,
        workflow: Optional[str] = None,
        *,
        page_size: Optional[int] = None,
        page_token: Optional[str] = None,
        timeout: Optional[float] = None,
    ) -> conversation_pb2.ListConversationsResponse:
        """One page, in the server's order; ``.next_page_token`` is empty on the last page."""
        request = c.list_request(workflow, page_size, page_token)
        return self._unary(self.conversations.ListConversations, request, timeout)

    def iter_conversations(
        self, workflow: Optional[str] = None, *, page_size: Optional[int] = None
    ) -> Iterator[conversation_pb2.Conversation]:
        """Every conversation, in the server's order, fetching pages as needed."""
        token: Optional[str] = None
        while True:
            page = self.list_conversations(workflow, page_size=page_size, page_token=token)
            yield from page.conversations
            if not page.next_page_token:
                return
            token = page.next_page_token

    def reset_conversation(
        self,
        conversation_id: str,
        *,
        idempotency_key: Optional[str] = None,
        timeout: Optional[float] = None,
    ) -> conversation_pb2.Conversation:
        request = conversation_pb2.ResetConversationRequest(
            conversation_id=conversation_id, idempotency_key=idempotency_key or ""
        )
        return self._unary(self.conversations.ResetConversation, request, timeout).conversation

    def delete_conversation(self, conversation_id: str, *, timeout: Optional[float] = None) -> None:
        request = conversation_pb2.DeleteConversationRequest(conversation_id=conversation_id)
        self._unary(self.conversations.DeleteConversation, request, timeout)

    # -- TriageService ---------------------------------------------------------------------
    def triage_ticket(
        self,
        customer_id: str,
        message: str,
        subject: Optional[str] = None,
        language: Optional[str] = None,
        idempotency_key: Optional[str] = None,
        *,
        timeout: Optional[float] = None,
    ) -> TriageStream:
        """Triages one customer message. Iterate the returned stream for the TicketResolution
        (which ticket the message belongs to), the RunEvents in order, then the TriageResult;
        or call ``.result()``. ``language`` is an ISO 639-1 hint (detected when None)."""
        request = c.triage_request(customer_id, message, subject, language, idempotency_key)
        return TriageStream(self, request, timeout)

    def get_ticket(
        self, customer_id: str, ticket_id: str, *, timeout: Optional[float] = None
    ) -> triage_pb2.GetTicketResponse:
        """One of the customer's tickets, active or archived: ``.ticket``, ``.messages`` and
        the latest ``.result``. Another customer's ticket is NOT_FOUND."""
        request = triage_pb2.GetTicketRequest(customer_id=customer_id, ticket_id=ticket_id)
        return self._unary(self.triage.GetTicket, request, timeout)

    def list_tickets(
        self,
        customer_id: str,
        status: Union[None, str, int] = None,
        *,
        page_size: Optional[int] = None,
        page_token: Optional[str] = None,
        timeout: Optional[float] = None,
    ) -> triage_pb2.ListTicketsResponse:
        """One page of the customer's archived tickets, most recently completed first.
        ``status`` is "resolved", "escalated" (None: both), "active" (the active tickets,
        unpaged) or a TicketStatus value; ``.next_page_token`` is empty on the last page."""
        request = c.list_tickets_request(customer_id, status, page_size, page_token)
        return self._unary(self.triage.ListTickets, request, timeout)

    def iter_tickets(
        self,
        customer_id: str,
        status: Union[None, str, int] = None,
        *,
        page_size: Optional[int] = None,
    ) -> Iterator[triage_pb2.Ticket]:
        """Every archived ticket of the customer (or those of ``status``), fetching pages."""
        token: Optional[str] = None
        while True:
            page = self.list_tickets(customer_id, status, page_size=page_size, page_token=token)
            yield from page.tickets
            if not page.next_page_token:
                return
            token = page.next_page_token

    def list_active_tickets(
        self, customer_id: str, *, timeout: Optional[float] = None
    ) -> List[triage_pb2.Ticket]:
        """The customer's active tickets (awaiting a specialist or a follow-up)."""
        request = triage_pb2.ListActiveTicketsRequest(customer_id=customer_id)
        return list(self._unary(self.triage.ListActiveTickets, request, timeout).tickets)

    # -- InvestigationService --------------------------------------------------------------
    def start_investigation(
        self,
        mutation: Union[str, investigation_pb2.HrMutation],
        idempotency_key: Optional[str] = None,
        *,
        timeout: Optional[float] = None,
    ) -> InvestigationStream:
        """Starts the investigation of an HR mutation: a mutation id of the imported HR data
        ("1002"), or an HrMutation given inline (recorded with the HR data). Iterate the
        returned stream for the run's events, agent messages and status changes, then the
        Investigation; or call ``.result()``. A second investigation of a mutation is
        ALREADY_EXISTS, an unknown mutation id NOT_FOUND."""
        request = c.start_investigation_request(mutation, idempotency_key)
        return InvestigationStream(self, self.investigations.StartInvestigation, request, timeout)

    def respond(
        self,
        investigation_id: str,
        action_id: str,
        role: Union[str, int],
        responder_id: str,
        text: Optional[str] = None,
        decision: Union[None, str, int] = None,
        idempotency_key: Optional[str] = None,
        *,
        timeout: Optional[float] = None,
    ) -> InvestigationStream:
        """Answers a pending action (``PendingAction.action_id``): the changer's clarification
        (``role="changer"``, ``text`` required) or the manager's decision (``role="manager"``,
        ``decision="approve"`` or ``"deny"``, ``text`` an optional comment). Streams the
        continuation like start_investigation. Someone other than the action's recipient, or
        the wrong role, is PERMISSION_DENIED (reason WRONG_RESPONDER); an action already
        answered is FAILED_PRECONDITION (reason INTERRUPT_ANSWERED)."""
        request = c.respond_request(
            investigation_id, action_id, role, responder_id, text, decision, idempotency_key
        )
        return InvestigationStream(self, self.investigations.Respond, request, timeout)

    def get_investigation(
        self, investigation_id: str, *, timeout: Optional[float] = None
    ) -> investigation_pb2.Investigation:
        """The investigation ("INV-<mutation id>") as it stands; unknown is NOT_FOUND."""
        request = investigation_pb2.GetInvestigationRequest(investigation_id=investigation_id)
        return self._unary(self.investigations.GetInvestigation, request, timeout).investigation

    def list_investigations(
        self,
        status: Union[None, str, int] = None,
        *,
        page_size: Optional[int] = None,
        page_token: Optional[str] = None,
        timeout: Optional[float] = None,
    ) -> investigation_pb2.ListInvestigationsResponse:
        """One page of investigations, most recently started first; ``status`` (a name such as
        "awaiting_user_response", or an InvestigationStatus) filters, None lists every status.
        ``.next_page_token`` is empty on the last page."""
        request = c.list_investigations_request(status, page_size, page_token)
        return self._unary(self.investigations.ListInvestigations, request, timeout)

    def iter_investigations(
        self, status: Union[None, str, int] = None, *, page_size: Optional[int] = None
    ) -> Iterator[investigation_pb2.Investigation]:
        """Every investigation (or those of ``status``), most recently started first, fetching
        pages as needed."""
        token: Optional[str] = None
        while True:
            page = self.list_investigations(status, page_size=page_size, page_token=token)
            yield from page.investigations
            if not page.next_page_token:
                return
            token = page.next_page_token

    def watch_investigation(
        self, investigation_id: str, after_seq: int = 0, *, timeout: Optional[float] = None
    ) -> AuditStream:
        """The investigation's audit entries with a seq above ``after_seq`` (0: the whole
        trail), then each new one as it is written; the stream ends once the advisory report is
        generated. A watch cut with UNAVAILABLE (a server shutting down) is made again from the
        last seq delivered, under the retry policy, whose attempts and waiting count afresh
        after each entry delivered; ``timeout`` covers the whole watch."""
        request = investigation_pb2.WatchInvestigationRequest(
            investigation_id=investigation_id, after_seq=after_seq
        )
        return AuditStream(self, request, timeout)

    def get_audit_trail(
        self,
        investigation_id: Optional[str] = None,
        *,
        correlation_id: Optional[str] = None,
        timeout: Optional[float] = None,
    ) -> List[investigation_pb2.AuditEntry]:
        """The audit trail of one investigation, or of one message exchange (the entries that
        share ``correlation_id``); give exactly one."""
        request = c.audit_trail_request(investigation_id, correlation_id)
        return list(self._unary(self.investigations.GetAuditTrail, request, timeout).entries)

    def list_pending_actions(
        self,
        recipient_id: Optional[str] = None,
        status: Union[None, str, int] = None,
        *,
        page_size: Optional[int] = None,
        page_token: Optional[str] = None,
        timeout: Optional[float] = None,
    ) -> investigation_pb2.ListPendingActionsResponse:
        """One page of notifications, oldest first: those awaiting a reply
        (``status="answered"``: those answered), of one recipient or (None) of everyone.
        ``page_size`` is 1..100 (None: the server's 20); ``page_token`` the
        ``.next_page_token`` of the previous page, which is empty on the last page."""
        request = c.list_pending_actions_request(recipient_id, status, page_size, page_token)
        return self._unary(self.investigations.ListPendingActions, request, timeout)

    def iter_pending_actions(
        self,
        recipient_id: Optional[str] = None,
        status: Union[None, str, int] = None,
        *,
        page_size: Optional[int] = None,
    ) -> Iterator[investigation_pb2.PendingAction]:
        """Every notification of the recipient (None: of everyone) with ``status``, oldest
        first, fetching pages as needed."""
        token: Optional[str] = None
        while True:
            page = self.list_pending_actions(
                recipient_id, status, page_size=page_size, page_token=token
            )
            yield from page.actions
            if not page.next_page_token:
                return
            token = page.next_page_token

    # -- ResearchService -------------------------------------------------------------------
    def ask(
        self,
        question: str,
        retry_limit: Optional[int] = None,
        corpus: Optional[str] = None,
        idempotency_key: Optional[str] = None,
        *,
        timeout: Optional[float] = None,
    ) -> ResearchStream:
        """Asks a research question. Iterate the returned stream for the run's events, the
        orchestrator's messages, each Plan, ResearchResult (with its citations), CriticVerdict
        and ExpertAnswer as they are produced, then the Research (its outcome, final answer and
        reasoning trace); or call ``.result()``. ``retry_limit`` is the rejections allowed
        before the question is given up (None: the server's default, 5; at most 20);
        ``corpus`` the document corpus (None: "sample"). An empty question, a retry limit over
        20 or an unknown corpus is INVALID_ARGUMENT."""
        request = c.ask_request(question, retry_limit, corpus, idempotency_key)
        return ResearchStream(self, request, timeout)

    def get_research(
        self, research_id: str, *, timeout: Optional[float] = None
    ) -> research_pb2.Research:
        """The research ("RES-...") as it stands; unknown is NOT_FOUND."""
        request = research_pb2.GetResearchRequest(research_id=research_id)
        return self._unary(self.research.GetResearch, request, timeout).research

    def list_research(
        self,
        *,
        page_size: Optional[int] = None,
        page_token: Optional[str] = None,
        timeout: Optional[float] = None,
    ) -> research_pb2.ListResearchResponse:
        """One page of research, ordered by research id (``.research``);
        ``.next_page_token`` is empty on the last page."""
        request = c.list_research_request(page_size, page_token)
        return self._unary(self.research.ListResearch, request, timeout)

    def iter_research(self, *, page_size: Optional[int] = None) -> Iterator[research_pb2.Research]:
        """Every research, ordered by research id, fetching pages as needed."""
        token: Optional[str] = None
        while True:
            page = self.list_research(page_size=page_size, page_token=token)
            yield from page.research
            if not page.next_page_token:
                return
            token = page.next_page_token

    # -- WorkflowService -------------------------------------------------------------------
    def list_workflows(self, *, timeout: Optional[float] = None) -> List[workflow_pb2.Workflow]:
        response = self._unary(
            self.workflows.ListWorkflows, workflow_pb2.ListWorkflowsRequest(), timeout
        )
        return list(response.workflows)

    def describe_workflow(
        self, name: str, *, timeout: Optional[float] = None
    ) -> workflow_pb2.DescribeWorkflowResponse:
        request = workflow_pb2.DescribeWorkflowRequest(name=name)
        return self._unary(self.workflows.DescribeWorkflow, request, timeout)

    def cancel_run(self, run_id: str, *, timeout: Optional[float] = None) -> bool:
        """Stops a running run (True). A run that is not running, unknown or already ended,
        raises NOT_FOUND; an id that is not a run id (a UUID) raises INVALID_ARGUMENT."""
        request = workflow_pb2.CancelRunRequest(run_id=run_id)
        return bool(self._unary(self.workflows.CancelRun, request, timeout).cancelled)

    def list_llm_calls(
        self,
        thread_id: str,
        *,
        page_size: Optional[int] = None,
        page_token: Optional[str] = None,
        timeout: Optional[float] = None,
    ) -> workflow_pb2.ListLlmCallsResponse:
        """One page of the model calls a thread made (a conversation id, a ticket thread
        "customer_id:ticket_id", an investigation id or a research id), the most recent first,
        as the server's LLM call log recorded them (``model.call_log`` "redacted" or "full";
        with it off a known thread lists none). ``page_size`` is at most 500 (None: the
        server's 50); a page also ends early once its prompts and replies reach about 3 MiB.
        ``page_token`` is the ``.next_page_token`` of the previous page, which reads on to older
        calls and is empty on the last page. ``.total_calls`` and ``.total_usage`` cover every
        recorded call of the thread. A thread the server does not know raises NOT_FOUND."""
        request = c.list_llm_calls_request(thread_id, page_size, page_token)
        return self._unary(self.workflows.ListLlmCalls, request, timeout)

    def iter_llm_calls(
        self, thread_id: str, *, page_size: Optional[int] = None
    ) -> Iterator[workflow_pb2.LlmCall]:
        """Every recorded model call of the thread, the most recent first, fetching pages as
        needed."""
        token: Optional[str] = None
        while True:
            page = self.list_llm_calls(thread_id, page_size=page_size, page_token=token)
            yield from page.calls
            if not page.next_page_token:
                return
            token = page.next_page_token

    def subscribe_run(
        self, run_id: str, after_event_id: int = 0, *, timeout: Optional[float] = None
    ) -> RunEventStream:
        """Re-attaches to a run by hand: its events numbered after ``after_event_id`` (0: from
        the first), then its live ones, ending after the run's last event. Only RunEvents, not
        the call's typed result: retry the original call with its idempotency key for that.
        A run the server does not know (ended too long ago, or running on another replica) is
        NOT_FOUND. Streams with an idempotency key re-attach on their own."""
        request = workflow_pb2.SubscribeRunRequest(run_id=run_id, after_event_id=after_event_id)
        call = self.workflows.SubscribeRun(request, timeout=timeout, metadata=self._metadata)
        return RunEventStream(call)
