"""FrontdeskClient: the blocking (thread-based) client."""

from __future__ import annotations

from typing import Any, Iterator, List, Optional, Sequence, Tuple, Union

import grpc

from frontdesk import _common as c
from frontdesk._errors import FrontdeskError
from frontdesk.v1 import (
    common_pb2,
    conversation_pb2,
    conversation_pb2_grpc,
    triage_pb2,
    triage_pb2_grpc,
    workflow_pb2,
    workflow_pb2_grpc,
)


class TurnStream(Iterator[c.StreamItem]):
    """One SendMessage call: iterate it for each RunEvent as it arrives, then the TurnResult.

    ``result()`` drains what is left and returns the TurnResult; ``cancel()`` stops the call
    (the server finishes the run anyway: it was committed when RunStarted arrived).
    Errors, before or during the stream, raise FrontdeskError.
    """

    def __init__(self, call: Any) -> None:
        self._call = call
        self._result: Optional[conversation_pb2.TurnResult] = None
        self.events: List[common_pb2.RunEvent] = []

    def __iter__(self) -> "TurnStream":
        return self

    def __next__(self) -> c.StreamItem:
        while True:
            try:
                response = next(self._call)
            except grpc.RpcError as e:
                raise FrontdeskError.from_rpc_error(e) from None
            item = c.unpack(response)
            if item is None:
                continue
            if isinstance(item, conversation_pb2.TurnResult):
                self._result = item
            else:
                self.events.append(item)
            return item

    def result(self) -> conversation_pb2.TurnResult:
        """Consumes the rest of the stream and returns the turn's result."""
        for _ in self:
            pass
        if self._result is None:
            raise FrontdeskError(grpc.StatusCode.INTERNAL, "stream ended without a TurnResult")
        return self._result

    def cancel(self) -> None:
        self._call.cancel()

    def __enter__(self) -> "TurnStream":
        return self

    def __exit__(self, *exc: object) -> None:
        self.cancel()


class TriageStream(Iterator[c.TriageItem]):
    """One TriageTicket call: iterate it for the matching run's events (when the customer has
    active tickets), the TicketResolution, each RunEvent of the ticket's run as it arrives, then
    the TriageResult.

    ``result()`` drains what is left and returns the TriageResult; ``resolution`` is the
    TicketResolution once it has arrived (None before); ``events`` the events seen so far;
    ``cancel()`` stops the call. Errors, before or during the stream, raise FrontdeskError.
    """

    def __init__(self, call: Any) -> None:
        self._call = call
        self._result: Optional[triage_pb2.TriageResult] = None
        self.resolution: Optional[triage_pb2.TicketResolution] = None
        self.events: List[common_pb2.RunEvent] = []

    def __iter__(self) -> "TriageStream":
        return self

    def __next__(self) -> c.TriageItem:
        while True:
            try:
                response = next(self._call)
            except grpc.RpcError as e:
                raise FrontdeskError.from_rpc_error(e) from None
            item = c.unpack_triage(response)
            if item is None:
                continue
            if isinstance(item, triage_pb2.TriageResult):
                self._result = item
            elif isinstance(item, triage_pb2.TicketResolution):
                self.resolution = item
            else:
                self.events.append(item)
            return item

    def result(self) -> triage_pb2.TriageResult:
        """Consumes the rest of the stream and returns the triage result."""
        for _ in self:
            pass
        if self._result is None:
            raise FrontdeskError(grpc.StatusCode.INTERNAL, "stream ended without a TriageResult")
        return self._result

    def cancel(self) -> None:
        self._call.cancel()

    def __enter__(self) -> "TriageStream":
        return self

    def __exit__(self, *exc: object) -> None:
        self.cancel()


class FrontdeskClient:
    """Blocking client for Frontdesk's ConversationService, TriageService and WorkflowService.

    ``target`` is host:port. Without ``credentials`` the channel is plaintext; pass
    ``grpc.ssl_channel_credentials()`` (or others) for TLS. ``metadata`` is sent with every
    call (for example an authorization header), ``timeout`` is the default deadline in
    seconds for unary calls (streams have none unless given per call).
    Use as a context manager, or call close().
    """

    def __init__(
        self,
        target: str = c.DEFAULT_TARGET,
        *,
        credentials: Optional[grpc.ChannelCredentials] = None,
        metadata: Optional[c.Metadata] = None,
        timeout: Optional[float] = 30.0,
        options: Optional[Sequence[Tuple[str, Any]]] = None,
        channel: Optional[grpc.Channel] = None,
    ) -> None:
        if channel is None:
            if credentials is None:
                channel = grpc.insecure_channel(target, options=options)
            else:
                channel = grpc.secure_channel(target, credentials, options=options)
            self._owns_channel = True
        else:
            self._owns_channel = False
        self.channel = channel
        self._metadata = list(metadata or [])
        self._timeout = timeout
        self.conversations = conversation_pb2_grpc.ConversationServiceStub(channel)
        self.workflows = workflow_pb2_grpc.WorkflowServiceStub(channel)
        self.triage = triage_pb2_grpc.TriageServiceStub(channel)

    # -- lifecycle -------------------------------------------------------------------------
    def close(self) -> None:
        if self._owns_channel:
            self.channel.close()

    def __enter__(self) -> "FrontdeskClient":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _unary(self, method: Any, request: Any, timeout: Optional[float]) -> Any:
        try:
            return method(
                request,
                timeout=self._timeout if timeout is None else timeout,
                metadata=self._metadata,
            )
        except grpc.RpcError as e:
            raise FrontdeskError.from_rpc_error(e) from None

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
        call = self.conversations.SendMessage(request, timeout=timeout, metadata=self._metadata)
        return TurnStream(call)

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
        call = self.triage.TriageTicket(request, timeout=timeout, metadata=self._metadata)
        return TriageStream(call)

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
