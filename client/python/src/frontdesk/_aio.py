"""AsyncFrontdeskClient: the asyncio client (grpc.aio)."""

from __future__ import annotations

import asyncio
from typing import Any, AsyncIterator, List, Optional, Sequence, Tuple, Union

import grpc
import grpc.aio

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


class _AsyncRunStream(RunStreamCore):
    """The asyncio twin of the blocking client's stream machinery: receiving, waiting between
    attempts on the event loop, and ``result()``."""

    def __init__(
        self, client: "AsyncFrontdeskClient", method: Any, request: Any, timeout: Optional[float]
    ) -> None:
        self._wake: Optional[asyncio.Event] = None
        super().__init__(client, method, request, timeout)

    def cancel(self) -> None:
        """Stops the call, and any retry or re-attach."""
        self._cancelled = True
        if self._wake is not None:
            self._wake.set()
        self._call.cancel()

    async def _follow(self, plan: Plan) -> None:
        if plan.action == "raise":
            assert plan.error is not None
            raise self._end(plan.error)
        if plan.delay > 0 and not self._cancelled:
            self._wake = asyncio.Event()
            try:
                await asyncio.wait_for(self._wake.wait(), plan.delay)
            except asyncio.TimeoutError:
                pass
        if self._cancelled:
            raise self._end(FrontdeskError.cancelled_by_caller())
        self._call = self._open(plan)

    async def _receive(self) -> Any:
        while True:
            if self._done:
                raise StopAsyncIteration
            try:
                response = await self._call.read()
            except grpc.RpcError as e:  # grpc.aio.AioRpcError included
                if self._final is not None:
                    self._done = True
                    raise StopAsyncIteration from None
                err = FrontdeskError.from_rpc_error(e)
                if self._cancelled:
                    raise self._end(err) from None
                await self._follow(self._resumer.failed(err))
                continue
            except asyncio.CancelledError:
                if not self._cancelled:
                    raise
                raise self._end(FrontdeskError.cancelled_by_caller()) from None
            if response is grpc.aio.EOF:
                if self._final is not None:
                    self._done = True
                    raise StopAsyncIteration
                await self._follow(self._resumer.ended())
                continue
            item = self._accept(response)
            if item is not None:
                return self._deliver(item)

    async def _drain(self) -> Any:
        try:
            while True:
                await self._receive()
        except StopAsyncIteration:
            pass
        return self._outcome()


class AsyncTurnStream(c.TurnProgress, _AsyncRunStream, AsyncIterator[c.StreamItem]):
    """One SendMessage call: ``async for`` yields each RunEvent as it arrives, then the
    TurnResult. ``await result()`` drains the rest; ``cancel()`` stops the call.
    Errors raise FrontdeskError. Retries and re-attaching as for a TurnStream."""

    def __init__(
        self, client: "AsyncFrontdeskClient", request: Any, timeout: Optional[float]
    ) -> None:
        c.TurnProgress.__init__(self)
        _AsyncRunStream.__init__(self, client, client.conversations.SendMessage, request, timeout)

    def __aiter__(self) -> "AsyncTurnStream":
        return self

    async def __anext__(self) -> c.StreamItem:
        return await self._receive()  # type: ignore[no-any-return]

    async def result(self) -> conversation_pb2.TurnResult:
        return await self._drain()  # type: ignore[no-any-return]

    async def __aenter__(self) -> "AsyncTurnStream":
        return self

    async def __aexit__(self, *exc: object) -> None:
        self.cancel()


class AsyncTriageStream(c.TriageProgress, _AsyncRunStream, AsyncIterator[c.TriageItem]):
    """One TriageTicket call: ``async for`` yields the matching run's events (when the customer
    has active tickets), the TicketResolution, each RunEvent of the ticket's run as it
    arrives, then the TriageResult. ``await result()`` drains the rest; ``resolution`` is the
    TicketResolution once it has arrived (None before); ``cancel()`` stops the call.
    Errors raise FrontdeskError. Retries and re-attaching as for a TriageStream."""

    def __init__(
        self, client: "AsyncFrontdeskClient", request: Any, timeout: Optional[float]
    ) -> None:
        c.TriageProgress.__init__(self)
        _AsyncRunStream.__init__(self, client, client.triage.TriageTicket, request, timeout)

    def __aiter__(self) -> "AsyncTriageStream":
        return self

    async def __anext__(self) -> c.TriageItem:
        return await self._receive()  # type: ignore[no-any-return]

    async def result(self) -> triage_pb2.TriageResult:
        return await self._drain()  # type: ignore[no-any-return]

    async def __aenter__(self) -> "AsyncTriageStream":
        return self

    async def __aexit__(self, *exc: object) -> None:
        self.cancel()


class AsyncInvestigationStream(
    c.InvestigationProgress, _AsyncRunStream, AsyncIterator[c.InvestigationItem]
):
    """One StartInvestigation or Respond call: ``async for`` yields each RunEvent, AgentMessage
    and StatusChange as the run produces them, then the Investigation as the run left it.
    ``await result()`` drains the rest and returns the Investigation; ``events``, ``messages``
    and ``status_changes`` hold what arrived so far; ``cancel()`` stops the call.
    Errors raise FrontdeskError. Retries and re-attaching as for an InvestigationStream."""

    def __init__(
        self,
        client: "AsyncFrontdeskClient",
        method: Any,
        request: Any,
        timeout: Optional[float],
    ) -> None:
        c.InvestigationProgress.__init__(self)
        _AsyncRunStream.__init__(self, client, method, request, timeout)

    def __aiter__(self) -> "AsyncInvestigationStream":
        return self

    async def __anext__(self) -> c.InvestigationItem:
        return await self._receive()  # type: ignore[no-any-return]

    async def result(self) -> investigation_pb2.Investigation:
        return await self._drain()  # type: ignore[no-any-return]

    async def __aenter__(self) -> "AsyncInvestigationStream":
        return self

    async def __aexit__(self, *exc: object) -> None:
        self.cancel()


class _AsyncListenStream:
    """What AsyncAuditStream and AsyncRunEventStream share: reading the call and ``cancel()``.
    After ``cancel()`` the stream raises CANCELLED as a FrontdeskError, as the blocking client's
    streams and the run streams do, and hands out nothing that had already arrived. grpc.aio
    raises asyncio.CancelledError there instead, which would read as the caller's own task being
    cancelled (a TaskGroup would cancel its siblings); a real cancellation of the task still
    passes through."""

    def __init__(self, call: Any) -> None:
        self._call = call
        self._cancelled = False

    async def _read(self) -> Any:
        """The next response; StopAsyncIteration at the end, FrontdeskError for a failure."""
        if self._cancelled:
            raise FrontdeskError.cancelled_by_caller()
        try:
            response = await self._call.read()
        except grpc.RpcError as e:  # grpc.aio.AioRpcError included
            raise FrontdeskError.from_rpc_error(e) from None
        except asyncio.CancelledError:
            if not self._cancelled:
                raise
            raise FrontdeskError.cancelled_by_caller() from None
        if response is grpc.aio.EOF:
            raise StopAsyncIteration
        return response

    def cancel(self) -> None:
        self._cancelled = True
        self._call.cancel()


class AsyncAuditStream(_AsyncListenStream, AsyncIterator[investigation_pb2.AuditEntry]):
    """One WatchInvestigation: ``async for`` yields each AuditEntry, the trail so far first,
    then each new one as it is written; it ends once the advisory report is generated.
    ``entries`` holds what arrived so far; ``cancel()`` stops the call, and the stream then
    raises CANCELLED. A call cut with UNAVAILABLE is made again from the last seq delivered,
    under the client's retry policy, as for an AuditStream. Errors raise FrontdeskError."""

    def __init__(
        self, client: "AsyncFrontdeskClient", request: Any, timeout: Optional[float]
    ) -> None:
        self._client = client
        self._investigation_id = request.investigation_id
        self._resumer = WatchResumer(client._retry, deadline_of(timeout), request.after_seq)
        self._wake: Optional[asyncio.Event] = None
        # The error that ended the watch: raised again rather than watching again.
        self._error: Optional[FrontdeskError] = None
        super().__init__(self._open())
        self.entries: List[investigation_pb2.AuditEntry] = []

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

    def cancel(self) -> None:
        super().cancel()
        if self._wake is not None:
            self._wake.set()

    def __aiter__(self) -> "AsyncAuditStream":
        return self

    async def __anext__(self) -> investigation_pb2.AuditEntry:
        while True:
            if self._error is not None:
                raise self._error
            try:
                response = await self._read()
            except FrontdeskError as err:
                wait = None if self._cancelled else self._resumer.failed(err)
                if wait is None:
                    self._error = err
                    raise
                # Created here, on the loop that waits (the stream may be made outside one).
                self._wake = asyncio.Event()
                try:
                    await asyncio.wait_for(self._wake.wait(), wait)
                except asyncio.TimeoutError:
                    pass
                if self._cancelled:
                    self._error = FrontdeskError.cancelled_by_caller()
                    raise self._error from None
                self._call = self._open()
                continue
            if not response.HasField("entry") or not self._resumer.fresh(response.entry):
                continue
            self.entries.append(response.entry)
            return response.entry

    async def __aenter__(self) -> "AsyncAuditStream":
        return self

    async def __aexit__(self, *exc: object) -> None:
        self.cancel()


class AsyncResearchStream(c.ResearchProgress, _AsyncRunStream, AsyncIterator[c.ResearchItem]):
    """One Ask call: ``async for`` yields each RunEvent, OrchestratorMessage, Plan,
    ResearchResult, CriticVerdict and ExpertAnswer as the run produces them, then the Research.
    ``await result()`` drains the rest and returns the Research; ``events``, ``messages``,
    ``plans``, ``results``, ``critic_decisions`` and ``expert_answers`` hold what arrived so
    far; ``cancel()`` stops the call. Errors raise FrontdeskError. Retries and re-attaching as
    for a ResearchStream."""

    def __init__(
        self, client: "AsyncFrontdeskClient", request: Any, timeout: Optional[float]
    ) -> None:
        c.ResearchProgress.__init__(self)
        _AsyncRunStream.__init__(self, client, client.research.Ask, request, timeout)

    def __aiter__(self) -> "AsyncResearchStream":
        return self

    async def __anext__(self) -> c.ResearchItem:
        return await self._receive()  # type: ignore[no-any-return]

    async def result(self) -> research_pb2.Research:
        return await self._drain()  # type: ignore[no-any-return]

    async def __aenter__(self) -> "AsyncResearchStream":
        return self

    async def __aexit__(self, *exc: object) -> None:
        self.cancel()


class AsyncRunEventStream(_AsyncListenStream, AsyncIterator[common_pb2.RunEvent]):
    """One SubscribeRun call: ``async for`` yields the run's events after the event id given,
    then its live ones, ending after the run's last event. ``skipped`` counts the events the
    server no longer held; ``cancel()`` stops the call, and the stream then raises CANCELLED.
    Errors raise FrontdeskError. Never retried."""

    def __init__(self, call: Any) -> None:
        super().__init__(call)
        self.events: List[common_pb2.RunEvent] = []
        self.skipped = 0

    def __aiter__(self) -> "AsyncRunEventStream":
        return self

    async def __anext__(self) -> common_pb2.RunEvent:
        while True:
            response = await self._read()
            self.skipped += response.skipped
            if not response.HasField("event"):
                continue
            self.events.append(response.event)
            return response.event

    async def __aenter__(self) -> "AsyncRunEventStream":
        return self

    async def __aexit__(self, *exc: object) -> None:
        self.cancel()


class AsyncFrontdeskClient:
    """asyncio client with the same methods as FrontdeskClient, as coroutines; send_message
    returns an AsyncTurnStream, triage_ticket an AsyncTriageStream, start_investigation and
    respond an AsyncInvestigationStream, watch_investigation an AsyncAuditStream and ask an
    AsyncResearchStream. Use ``async with``, or ``await close()``. ``api_key`` and ``tls`` are
    as FrontdeskClient's."""

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
        channel: Optional[grpc.aio.Channel] = None,
        retry: RetryOption = True,
    ) -> None:
        self._metadata = _auth.bearer_metadata(api_key, metadata)
        credentials, tls_options = _auth.resolve_tls(tls, credentials)
        if channel is None:
            options = [*(options or []), *tls_options]
            if credentials is None:
                channel = grpc.aio.insecure_channel(target, options=options)
            else:
                channel = grpc.aio.secure_channel(target, credentials, options=options)
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

    async def close(self) -> None:
        if self._owns_channel:
            await self.channel.close()

    async def __aenter__(self) -> "AsyncFrontdeskClient":
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    async def _unary(self, method: Any, request: Any, timeout: Optional[float]) -> Any:
        """One unary call; retried per the retry policy when the request carries an
        idempotency key, within one deadline."""
        keyed = bool(getattr(request, "idempotency_key", ""))
        budget = Budget(
            self._retry if keyed else None,
            deadline_of(self._timeout if timeout is None else timeout),
        )
        while True:
            try:
                return await method(request, timeout=budget.timeout(), metadata=self._metadata)
            except grpc.RpcError as e:
                err = FrontdeskError.from_rpc_error(e)
            wait = budget.delay(err)
            if wait is None:
                raise err
            budget.calls += 1
            budget.waited += wait
            await asyncio.sleep(wait)

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
        return AsyncTurnStream(self, request, timeout)

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
        return AsyncTriageStream(self, request, timeout)

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
        return AsyncInvestigationStream(
            self, self.investigations.StartInvestigation, request, timeout
        )

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
        return AsyncInvestigationStream(self, self.investigations.Respond, request, timeout)

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
        result (not awaited itself). Resumes after UNAVAILABLE as the blocking client's does."""
        request = investigation_pb2.WatchInvestigationRequest(
            investigation_id=investigation_id, after_seq=after_seq
        )
        return AsyncAuditStream(self, request, timeout)

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
        page_size: Optional[int] = None,
        page_token: Optional[str] = None,
        timeout: Optional[float] = None,
    ) -> investigation_pb2.ListPendingActionsResponse:
        request = c.list_pending_actions_request(recipient_id, status, page_size, page_token)
        return await self._unary(self.investigations.ListPendingActions, request, timeout)

    async def iter_pending_actions(
        self,
        recipient_id: Optional[str] = None,
        status: Union[None, str, int] = None,
        *,
        page_size: Optional[int] = None,
    ) -> AsyncIterator[investigation_pb2.PendingAction]:
        token: Optional[str] = None
        while True:
            page = await self.list_pending_actions(
                recipient_id, status, page_size=page_size, page_token=token
            )
            for action in page.actions:
                yield action
            if not page.next_page_token:
                return
            token = page.next_page_token

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
        return AsyncResearchStream(self, request, timeout)

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

    async def list_llm_calls(
        self,
        thread_id: str,
        *,
        page_size: Optional[int] = None,
        page_token: Optional[str] = None,
        timeout: Optional[float] = None,
    ) -> workflow_pb2.ListLlmCallsResponse:
        request = c.list_llm_calls_request(thread_id, page_size, page_token)
        return await self._unary(self.workflows.ListLlmCalls, request, timeout)

    async def iter_llm_calls(
        self, thread_id: str, *, page_size: Optional[int] = None
    ) -> AsyncIterator[workflow_pb2.LlmCall]:
        token: Optional[str] = None
        while True:
            page = await self.list_llm_calls(thread_id, page_size=page_size, page_token=token)
            for call in page.calls:
                yield call
            if not page.next_page_token:
                return
            token = page.next_page_token

    def subscribe_run(
        self, run_id: str, after_event_id: int = 0, *, timeout: Optional[float] = None
    ) -> AsyncRunEventStream:
        """Re-attaches to a run by hand, as FrontdeskClient.subscribe_run: its events after
        ``after_event_id``, then its live ones, ending after the run's last event."""
        request = workflow_pb2.SubscribeRunRequest(run_id=run_id, after_event_id=after_event_id)
        call = self.workflows.SubscribeRun(request, timeout=timeout, metadata=self._metadata)
        return AsyncRunEventStream(call)
