"""AsyncFrontdeskClient: the asyncio client (grpc.aio)."""

from __future__ import annotations

from typing import Any, AsyncIterator, List, Optional, Sequence, Tuple, Union

import grpc
import grpc.aio

from frontdesk import _common as c
from frontdesk._errors import FrontdeskError
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


class AsyncTurnStream(AsyncIterator[c.StreamItem]):
    """One SendMessage call: ``async for`` yields each RunEvent as it arrives, then the
    TurnResult. ``await result()`` drains the rest; ``cancel()`` stops the call.
    Errors raise FrontdeskError."""

    def __init__(self, call: Any) -> None:
        self._call = call
        self._iter: Optional[AsyncIterator[Any]] = None
        self._result: Optional[conversation_pb2.TurnResult] = None
        self.events: List[common_pb2.RunEvent] = []

    def __aiter__(self) -> "AsyncTurnStream":
        return self

    async def __anext__(self) -> c.StreamItem:
        if self._iter is None:
            self._iter = self._call.__aiter__()
        while True:
            try:
                response = await self._iter.__anext__()
            except grpc.aio.AioRpcError as e:
                raise FrontdeskError.from_rpc_error(e) from None
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

    async def result(self) -> conversation_pb2.TurnResult:
        async for _ in self:
            pass
        if self._result is None:
            raise FrontdeskError(grpc.StatusCode.INTERNAL, "stream ended without a TurnResult")
        return self._result

    def cancel(self) -> None:
        self._call.cancel()

    async def __aenter__(self) -> "AsyncTurnStream":
        return self

    async def __aexit__(self, *exc: object) -> None:
        self.cancel()


class AsyncTriageStream(AsyncIterator[c.TriageItem]):
    """One TriageTicket call: ``async for`` yields the matching run's events (when the customer
    has active tickets), the TicketResolution, each RunEvent of the ticket's run as it
    arrives, then the TriageResult. ``await result()`` drains the rest; ``resolution`` is the
    TicketResolution once it has arrived (None before); ``cancel()`` stops the call.
    Errors raise FrontdeskError."""

    def __init__(self, call: Any) -> None:
        self._call = call
        self._iter: Optional[AsyncIterator[Any]] = None
        self._result: Optional[triage_pb2.TriageResult] = None
        self.resolution: Optional[triage_pb2.TicketResolution] = None
        self.events: List[common_pb2.RunEvent] = []

    def __aiter__(self) -> "AsyncTriageStream":
        return self

    async def __anext__(self) -> c.TriageItem:
        if self._iter is None:
            self._iter = self._call.__aiter__()
        while True:
            try:
                response = await self._iter.__anext__()
            except grpc.RpcError as e:  # grpc.aio.AioRpcError included
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

    async def result(self) -> triage_pb2.TriageResult:
        async for _ in self:
            pass
        if self._result is None:
            raise FrontdeskError(grpc.StatusCode.INTERNAL, "stream ended without a TriageResult")
        return self._result

    def cancel(self) -> None:
        self._call.cancel()

    async def __aenter__(self) -> "AsyncTriageStream":
        return self

    async def __aexit__(self, *exc: object) -> None:
        self.cancel()


class AsyncInvestigationStream(AsyncIterator[c.InvestigationItem]):
    """One StartInvestigation or Respond call: ``async for`` yields each RunEvent, AgentMessage
    and StatusChange as the run produces them, then the Investigation as the run left it.
    ``await result()`` drains the rest and returns the Investigation; ``events``, ``messages``
    and ``status_changes`` hold what arrived so far; ``cancel()`` stops the call.
    Errors raise FrontdeskError."""

    def __init__(self, call: Any) -> None:
        self._call = call
        self._iter: Optional[AsyncIterator[Any]] = None
        self._result: Optional[investigation_pb2.Investigation] = None
        self.events: List[common_pb2.RunEvent] = []
        self.messages: List[investigation_pb2.AgentMessage] = []
        self.status_changes: List[investigation_pb2.StatusChange] = []

    def __aiter__(self) -> "AsyncInvestigationStream":
        return self

    async def __anext__(self) -> c.InvestigationItem:
        if self._iter is None:
            self._iter = self._call.__aiter__()
        while True:
            try:
                response = await self._iter.__anext__()
            except grpc.RpcError as e:  # grpc.aio.AioRpcError included
                raise FrontdeskError.from_rpc_error(e) from None
            item = c.unpack_investigation(response)
            if item is None:
                continue
            if isinstance(item, investigation_pb2.Investigation):
                self._result = item
            elif isinstance(item, investigation_pb2.AgentMessage):
                self.messages.append(item)
            elif isinstance(item, investigation_pb2.StatusChange):
                self.status_changes.append(item)
            else:
                self.events.append(item)
            return item

    async def result(self) -> investigation_pb2.Investigation:
        async for _ in self:
            pass
        if self._result is None:
            raise FrontdeskError(grpc.StatusCode.INTERNAL, "stream ended without an Investigation")
        return self._result

    def cancel(self) -> None:
        self._call.cancel()

    async def __aenter__(self) -> "AsyncInvestigationStream":
        return self

    async def __aexit__(self, *exc: object) -> None:
        self.cancel()


class AsyncAuditStream(AsyncIterator[investigation_pb2.AuditEntry]):
    """One WatchInvestigation call: ``async for`` yields each AuditEntry, the trail so far
    first, then each new one as it is written; it ends once the advisory report is generated.
    ``entries`` holds what arrived so far; ``cancel()`` stops the call. Errors raise
    FrontdeskError."""

    def __init__(self, call: Any) -> None:
        self._call = call
        self._iter: Optional[AsyncIterator[Any]] = None
        self.entries: List[investigation_pb2.AuditEntry] = []

    def __aiter__(self) -> "AsyncAuditStream":
        return self

    async def __anext__(self) -> investigation_pb2.AuditEntry:
        if self._iter is None:
            self._iter = self._call.__aiter__()
        while True:
            try:
                response = await self._iter.__anext__()
            except grpc.RpcError as e:  # grpc.aio.AioRpcError included
                raise FrontdeskError.from_rpc_error(e) from None
            if not response.HasField("entry"):
                continue
            self.entries.append(response.entry)
            return response.entry

    def cancel(self) -> None:
        self._call.cancel()

    async def __aenter__(self) -> "AsyncAuditStream":
        return self

    async def __aexit__(self, *exc: object) -> None:
        self.cancel()


class AsyncResearchStream(c.ResearchProgress, AsyncIterator[c.ResearchItem]):
    """One Ask call: ``async for`` yields each RunEvent, OrchestratorMessage, Plan,
    ResearchResult, CriticVerdict and ExpertAnswer as the run produces them, then the Research.
    ``await result()`` drains the rest and returns the Research; ``events``, ``messages``,
    ``plans``, ``results``, ``critic_decisions`` and ``expert_answers`` hold what arrived so
    far; ``cancel()`` stops the call. Errors raise FrontdeskError."""

    def __init__(self, call: Any) -> None:
        super().__init__()
        self._call = call
        self._iter: Optional[AsyncIterator[Any]] = None

    def __aiter__(self) -> "AsyncResearchStream":
        return self

    async def __anext__(self) -> c.ResearchItem:
        if self._iter is None:
            self._iter = self._call.__aiter__()
        while True:
            try:
                response = await self._iter.__anext__()
            except grpc.RpcError as e:  # grpc.aio.AioRpcError included
                raise FrontdeskError.from_rpc_error(e) from None
            item = c.unpack_research(response)
            if item is None:
                continue
            self._record(item)
            return item

    async def result(self) -> research_pb2.Research:
        async for _ in self:
            pass
        if self._research is None:
            raise FrontdeskError(grpc.StatusCode.INTERNAL, "stream ended without a Research")
        return self._research

    def cancel(self) -> None:
        self._call.cancel()

    async def __aenter__(self) -> "AsyncResearchStream":
        return self

    async def __aexit__(self, *exc: object) -> None:
        self.cancel()


class AsyncFrontdeskClient:
    """asyncio client with the same methods as FrontdeskClient, as coroutines; send_message
    returns an AsyncTurnStream, triage_ticket an AsyncTriageStream, start_investigation and
    respond an AsyncInvestigationStream, watch_investigation an AsyncAuditStream and ask an
    AsyncResearchStream. Use ``async with``, or ``await close()``."""

    def __init__(
        self,
        target: str = c.DEFAULT_TARGET,
        *,
        credentials: Optional[grpc.ChannelCredentials] = None,
        metadata: Optional[c.Metadata] = None,
        timeout: Optional[float] = 30.0,
        options: Optional[Sequence[Tuple[str, Any]]] = None,
        channel: Optional[grpc.aio.Channel] = None,
    ) -> None:
        if channel is None:
            if credentials is None:
                channel = grpc.aio.insecure_channel(target, options=options)
            else:
                channel = grpc.aio.secure_channel(target, credentials, options=options)
            self._owns_channel = True
        else:
            self._owns_channel = False
        self.channel = channel
        self._metadata = list(metadata or [])
        self._timeout = timeout
        self.conversations = conversation_pb2_grpc.ConversationServiceStub(channel)
        self.workflows = workflow_pb2_grpc.WorkflowServiceStub(channel)
        self.triage = triage_pb2_grpc.TriageServiceStub(channel)
        self.investigations = investigation_pb2_grpc.InvestigationServiceStub(channel)
        self.research = research_pb2_grpc.ResearchServiceStub(channel)

    async def close(self) -> None:
        if self._owns_channel:
            await self.channel.close()

    async def __aenter__(self) -> "AsyncFrontdeskClient":
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    async def _unary(self, method: Any, request: Any, timeout: Optional[float]) -> Any:
        try:
            return await method(
                request,
                timeout=self._timeout if timeout is None else timeout,
                metadata=self._metadata,
            )
        except grpc.RpcError as e:
            raise FrontdeskError.from_rpc_error(e) from None

    async def start_conversation(
        self,
        workflow: str = "intake",
        *,
        conversation_id: Optional[str] = None,
        idempotency_key: Optional[str] = None,
        timeout: Optional[float] = None,
    ) -> conversation_pb2.StartConversationResponse:
        request = c.start_request(workflow, conversation_id, idempotency_key)
        return await self._unary(self.conversations.StartConversation, request, timeout)

    def send_message(
        self,
        conversation_id: str,
        text: str,
        idempotency_key: Optional[str] = None,
        *,
        busy_policy: Optional[str] = None,
        timeout: Optional[float] = None,
    ) -> AsyncTurnStream:
        """Sends one user turn; ``async for`` over the result (not awaited itself)."""
        request = c.send_request(conversation_id, text, idempotency_key, busy_policy)
        call = self.conversations.SendMessage(request, timeout=timeout, metadata=self._metadata)
        return AsyncTurnStream(call)

    async def get_conversation(
        self, conversation_id: str, *, timeout: Optional[float] = None
    ) -> conversation_pb2.GetConversationResponse:
        request = conversation_pb2.GetConversationRequest(conversation_id=conversation_id)
        return await self._unary(self.conversations.GetConversation, request, timeout)

    async def list_conversations(
        self,
        workflow: Optional[str] = None,
        *,
        page_size: Optional[int] = None,
        page_token: Optional[str] = None,
        timeout: Optional[float] = None,
    ) -> conversation_pb2.ListConversationsResponse:
        request = c.list_request(workflow, page_size, page_token)
        return await self._unary(self.conversations.ListConversations, request, timeout)

    async def iter_conversations(
        self, workflow: Optional[str] = None, *, page_size: Optional[int] = None
    ) -> AsyncIterator[conversation_pb2.Conversation]:
        token: Optional[str] = None
        while True:
            page = await self.list_conversations(workflow, page_size=page_size, page_token=token)
            for conversation in page.conversations:
                yield conversation
            if not page.next_page_token:
                return
            token = page.next_page_token

    async def reset_conversation(
        self,
        conversation_id: str,
        *,
        idempotency_key: Optional[str] = None,
        timeout: Optional[float] = None,
    ) -> conversation_pb2.Conversation:
        request = conversation_pb2.ResetConversationRequest(
            conversation_id=conversation_id, idempotency_key=idempotency_key or ""
        )
        response = await self._unary(self.conversations.ResetConversation, request, timeout)
        return response.conversation

    async def delete_conversation(
        self, conversation_id: str, *, timeout: Optional[float] = None
    ) -> None:
        request = conversation_pb2.DeleteConversationRequest(conversation_id=conversation_id)
        await self._unary(self.conversations.DeleteConversation, request, timeout)

    def triage_ticket(
        self,
        customer_id: str,
        message: str,
        subject: Optional[str] = None,
        language: Optional[str] = None,
        idempotency_key: Optional[str] = None,
        *,
        timeout: Optional[float] = None,
    ) -> AsyncTriageStream:
        """Triages one customer message; ``async for`` over the result (not awaited itself)."""
        request = c.triage_request(customer_id, message, subject, language, idempotency_key)
        call = self.triage.TriageTicket(request, timeout=timeout, metadata=self._metadata)
        return AsyncTriageStream(call)

    async def get_ticket(
        self, customer_id: str, ticket_id: str, *, timeout: Optional[float] = None
    ) -> triage_pb2.GetTicketResponse:
        request = triage_pb2.GetTicketRequest(customer_id=customer_id, ticket_id=ticket_id)
        return await self._unary(self.triage.GetTicket, request, timeout)

    async def list_tickets(
        self,
        customer_id: str,
        status: Union[None, str, int] = None,
        *,
        page_size: Optional[int] = None,
        page_token: Optional[str] = None,
        timeout: Optional[float] = None,
    ) -> triage_pb2.ListTicketsResponse:
        request = c.list_tickets_request(customer_id, status, page_size, page_token)
        return await self._unary(self.triage.ListTickets, request, timeout)

    async def iter_tickets(
        self,
        customer_id: str,
        status: Union[None, str, int] = None,
        *,
        page_size: Optional[int] = None,
    ) -> AsyncIterator[triage_pb2.Ticket]:
        token: Optional[str] = None
        while True:
            page = await self.list_tickets(
                customer_id, status, page_size=page_size, page_token=token
            )
            for ticket in page.tickets:
                yield ticket
            if not page.next_page_token:
                return
            token = page.next_page_token

    async def list_active_tickets(
        self, customer_id: str, *, timeout: Optional[float] = None
    ) -> List[triage_pb2.Ticket]:
        request = triage_pb2.ListActiveTicketsRequest(customer_id=customer_id)
        response = await self._unary(self.triage.ListActiveTickets, request, timeout)
        return list(response.tickets)

    def start_investigation(
        self,
        mutation: Union[str, investigation_pb2.HrMutation],
        idempotency_key: Optional[str] = None,
        *,
        timeout: Optional[float] = None,
    ) -> AsyncInvestigationStream:
        """Starts an investigation of a mutation id or an inline HrMutation; ``async for`` over
        the result (not awaited itself), or ``await result()`` for the Investigation."""
        request = c.start_investigation_request(mutation, idempotency_key)
        call = self.investigations.StartInvestigation(
            request, timeout=timeout, metadata=self._metadata
        )
        return AsyncInvestigationStream(call)

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
    ) -> AsyncInvestigationStream:
        """Answers a pending action; ``async for`` over the result (not awaited itself)."""
        request = c.respond_request(
            investigation_id, action_id, role, responder_id, text, decision, idempotency_key
        )
        call = self.investigations.Respond(request, timeout=timeout, metadata=self._metadata)
        return AsyncInvestigationStream(call)

    async def get_investigation(
        self, investigation_id: str, *, timeout: Optional[float] = None
    ) -> investigation_pb2.Investigation:
        request = investigation_pb2.GetInvestigationRequest(investigation_id=investigation_id)
        response = await self._unary(self.investigations.GetInvestigation, request, timeout)
        return response.investigation

    async def list_investigations(
        self,
        status: Union[None, str, int] = None,
        *,
        page_size: Optional[int] = None,
        page_token: Optional[str] = None,
        timeout: Optional[float] = None,
    ) -> investigation_pb2.ListInvestigationsResponse:
        request = c.list_investigations_request(status, page_size, page_token)
        return await self._unary(self.investigations.ListInvestigations, request, timeout)

    async def iter_investigations(
        self, status: Union[None, str, int] = None, *, page_size: Optional[int] = None
    ) -> AsyncIterator[investigation_pb2.Investigation]:
        token: Optional[str] = None
        while True:
            page = await self.list_investigations(status, page_size=page_size, page_token=token)
            for investigation in page.investigations:
                yield investigation
            if not page.next_page_token:
                return
            token = page.next_page_token

    def watch_investigation(
        self, investigation_id: str, after_seq: int = 0, *, timeout: Optional[float] = None
    ) -> AsyncAuditStream:
        """The audit entries after ``after_seq``, then each new one; ``async for`` over the
        result (not awaited itself)."""
        request = investigation_pb2.WatchInvestigationRequest(
            investigation_id=investigation_id, after_seq=after_seq
        )
        call = self.investigations.WatchInvestigation(
            request, timeout=timeout, metadata=self._metadata
        )
        return AsyncAuditStream(call)

    async def get_audit_trail(
        self,
        investigation_id: Optional[str] = None,
        *,
        correlation_id: Optional[str] = None,
        timeout: Optional[float] = None,
    ) -> List[investigation_pb2.AuditEntry]:
        request = c.audit_trail_request(investigation_id, correlation_id)
        response = await self._unary(self.investigations.GetAuditTrail, request, timeout)
        return list(response.entries)

    async def list_pending_actions(
        self,
        recipient_id: Optional[str] = None,
        status: Union[None, str, int] = None,
        *,
        timeout: Optional[float] = None,
    ) -> List[investigation_pb2.PendingAction]:
        request = investigation_pb2.ListPendingActionsRequest(
            recipient_id=recipient_id or "", status=c.pending_action_status(status)
        )
        response = await self._unary(self.investigations.ListPendingActions, request, timeout)
        return list(response.actions)

    def ask(
        self,
        question: str,
        retry_limit: Optional[int] = None,
        corpus: Optional[str] = None,
        idempotency_key: Optional[str] = None,
        *,
        timeout: Optional[float] = None,
    ) -> AsyncResearchStream:
        """Asks a research question; ``async for`` over the result (not awaited itself), or
        ``await result()`` for the Research."""
        request = c.ask_request(question, retry_limit, corpus, idempotency_key)
        call = self.research.Ask(request, timeout=timeout, metadata=self._metadata)
        return AsyncResearchStream(call)

    async def get_research(
        self, research_id: str, *, timeout: Optional[float] = None
    ) -> research_pb2.Research:
        request = research_pb2.GetResearchRequest(research_id=research_id)
        response = await self._unary(self.research.GetResearch, request, timeout)
        return response.research

    async def list_research(
        self,
        *,
        page_size: Optional[int] = None,
        page_token: Optional[str] = None,
        timeout: Optional[float] = None,
    ) -> research_pb2.ListResearchResponse:
        request = c.list_research_request(page_size, page_token)
        return await self._unary(self.research.ListResearch, request, timeout)

    async def iter_research(
        self, *, page_size: Optional[int] = None
    ) -> AsyncIterator[research_pb2.Research]:
        token: Optional[str] = None
        while True:
            page = await self.list_research(page_size=page_size, page_token=token)
            for research in page.research:
                yield research
            if not page.next_page_token:
                return
            token = page.next_page_token

    async def list_workflows(
        self, *, timeout: Optional[float] = None
    ) -> List[workflow_pb2.Workflow]:
        response = await self._unary(
            self.workflows.ListWorkflows, workflow_pb2.ListWorkflowsRequest(), timeout
        )
        return list(response.workflows)

    async def describe_workflow(
        self, name: str, *, timeout: Optional[float] = None
    ) -> workflow_pb2.DescribeWorkflowResponse:
        request = workflow_pb2.DescribeWorkflowRequest(name=name)
        return await self._unary(self.workflows.DescribeWorkflow, request, timeout)

    async def cancel_run(self, run_id: str, *, timeout: Optional[float] = None) -> bool:
        request = workflow_pb2.CancelRunRequest(run_id=run_id)
        response = await self._unary(self.workflows.CancelRun, request, timeout)
        return bool(response.cancelled)
