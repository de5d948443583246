"""TriageService against the live server. The scripted demo model answers the triage purposes
(translator.translate, supervisor.classify, specialist.billing, ticket_matcher.match): every
ticket is an English billing question that the billing specialist auto-responds to, so it is
resolved and archived at once."""

import asyncio
import uuid

import grpc
import pytest

from frontdesk import (
    AsyncFrontdeskClient,
    FrontdeskClient,
    FrontdeskError,
    RunEvent,
    TicketResolution,
    TriageResult,
    event_kind,
)
from frontdesk.v1 import conversation_pb2, triage_pb2

CUSTOMER = "CUST-001"
MESSAGE = "I was charged twice for my subscription this month."


def test_triage_ticket_streams_resolution_events_then_result(client: FrontdeskClient) -> None:
    stream = client.triage_ticket(CUSTOMER, MESSAGE, subject="Double charge")
    items = list(stream)

    resolution, *events, result = items
    assert isinstance(resolution, TicketResolution)
    assert all(isinstance(e, RunEvent) for e in events)
    assert isinstance(result, TriageResult)
    assert stream.resolution is resolution
    assert stream.events == events

    # a new ticket: the customer had no active ticket to match
    assert resolution.ticket_id.startswith("TKT-")
    assert not resolution.matched_existing

    assert event_kind(events[0]) == "run_started"
    assert event_kind(events[-1]) == "run_finished"
    assert [e.event_id for e in events] == list(range(1, len(events) + 1))
    assert {e.run_id for e in events} == {result.run_id}
    started = [e.node for e in events if event_kind(e) == "node_started"]
    assert {"translator", "supervisor", "billing_specialist"} <= set(started)
    assert started.index("translator") < started.index("supervisor")
    assert started.index("supervisor") < started.index("billing_specialist")
    tools = [e.tool_called.name for e in events if event_kind(e) == "tool_called"]
    assert "customer_lookup" in tools

    assert result.ticket_id == resolution.ticket_id
    assert result.customer_id == CUSTOMER
    assert result.ticket_type == triage_pb2.TICKET_TYPE_BILLING
    assert result.urgency == triage_pb2.URGENCY_MEDIUM
    assert result.recommended_action == triage_pb2.RECOMMENDED_ACTION_AUTO_RESPOND
    assert result.status == triage_pb2.TICKET_STATUS_RESOLVED
    assert result.suggested_response
    assert result.language == "en"
    assert not result.replayed


def test_get_and_list_tickets(client: FrontdeskClient) -> None:
    result = client.triage_ticket(CUSTOMER, MESSAGE, subject="Charged twice").result()
    ticket_id = result.ticket_id

    got = client.get_ticket(CUSTOMER, ticket_id)
    assert got.ticket.ticket_id == ticket_id
    assert got.ticket.customer_id == CUSTOMER
    assert got.ticket.subject == "Charged twice"
    assert got.ticket.status == triage_pb2.TICKET_STATUS_RESOLVED
    assert [m.role for m in got.messages] == [
        conversation_pb2.ROLE_USER,
        conversation_pb2.ROLE_ASSISTANT,
    ]
    assert got.messages[0].text == MESSAGE
    assert got.messages[1].text == result.suggested_response
    assert got.result.ticket_id == ticket_id
    assert got.result.recommended_action == triage_pb2.RECOMMENDED_ACTION_AUTO_RESPOND

    # archived, most recently completed first (other tests may add tickets meanwhile)
    assert ticket_id in [t.ticket_id for t in client.list_tickets(CUSTOMER, page_size=50).tickets]
    assert ticket_id in [t.ticket_id for t in client.list_tickets(CUSTOMER, "resolved").tickets]
    assert ticket_id not in [t.ticket_id for t in client.list_tickets(CUSTOMER, "escalated").tickets]
    assert any(t.ticket_id == ticket_id for t in client.iter_tickets(CUSTOMER, page_size=1))
    # resolved at once: nothing stays active
    assert client.list_active_tickets(CUSTOMER) == []
    assert list(client.list_tickets(CUSTOMER, "active").tickets) == []


def test_list_tickets_pages(client: FrontdeskClient) -> None:
    customer = "CUST-002"
    for _ in range(2):
        client.triage_ticket(customer, MESSAGE).result()
    page = client.list_tickets(customer, page_size=1)
    assert len(page.tickets) == 1 and page.next_page_token
    page2 = client.list_tickets(customer, page_size=1, page_token=page.next_page_token)
    assert len(page2.tickets) == 1
    assert page2.tickets[0].ticket_id != page.tickets[0].ticket_id
    with pytest.raises(ValueError):
        client.list_tickets(customer, "open")


def test_idempotent_triage_replays(client: FrontdeskClient) -> None:
    key = str(uuid.uuid4())
    first = client.triage_ticket(CUSTOMER, MESSAGE, idempotency_key=key).result()
    stream = client.triage_ticket(CUSTOMER, MESSAGE, idempotency_key=key)
    again = stream.result()
    assert again.replayed
    assert again.ticket_id == first.ticket_id
    assert stream.resolution is not None
    assert stream.resolution.ticket_id == first.ticket_id


def test_unknown_customer_is_not_found(client: FrontdeskClient) -> None:
    with pytest.raises(FrontdeskError) as info:
        client.triage_ticket("CUST-999", MESSAGE).result()
    assert info.value.code == grpc.StatusCode.NOT_FOUND
    assert info.value.reason == "NOT_FOUND"


def test_another_customers_ticket_is_not_found(client: FrontdeskClient) -> None:
    ticket_id = client.triage_ticket(CUSTOMER, MESSAGE).result().ticket_id
    with pytest.raises(FrontdeskError) as info:
        client.get_ticket("CUST-002", ticket_id)
    assert info.value.code == grpc.StatusCode.NOT_FOUND
    assert info.value.reason == "NOT_FOUND"


def test_empty_message_is_invalid_argument(client: FrontdeskClient) -> None:
    with pytest.raises(FrontdeskError) as info:
        list(client.triage_ticket(CUSTOMER, ""))
    assert info.value.code == grpc.StatusCode.INVALID_ARGUMENT
    assert [v.field for v in info.value.field_violations] == ["message"]


def test_async_triage(addr: str) -> None:
    async def main():
        async with AsyncFrontdeskClient(addr, timeout=10) as client:
            stream = client.triage_ticket(CUSTOMER, MESSAGE, subject="Async")
            items = [item async for item in stream]
            ticket_id = stream.resolution.ticket_id if stream.resolution else ""
            got = await client.get_ticket(CUSTOMER, ticket_id)
            listed = [t.ticket_id async for t in client.iter_tickets(CUSTOMER, page_size=50)]
            active = await client.list_active_tickets(CUSTOMER)
            with pytest.raises(FrontdeskError) as missing:
                await client.triage_ticket("CUST-999", MESSAGE).result()
            with pytest.raises(FrontdeskError) as foreign:
                await client.get_ticket("CUST-002", ticket_id)
            return items, ticket_id, got, listed, active, missing.value, foreign.value

    items, ticket_id, got, listed, active, missing, foreign = asyncio.run(main())
    resolution, *events, result = items
    assert isinstance(resolution, TicketResolution)
    assert isinstance(result, TriageResult)
    assert ticket_id.startswith("TKT-")
    started = [e.node for e in events if event_kind(e) == "node_started"]
    assert {"translator", "supervisor", "billing_specialist"} <= set(started)
    assert result.recommended_action == triage_pb2.RECOMMENDED_ACTION_AUTO_RESPOND
    assert result.status == triage_pb2.TICKET_STATUS_RESOLVED
    assert len(got.messages) == 2
    assert ticket_id in listed
    assert active == []
    assert missing.code == grpc.StatusCode.NOT_FOUND and missing.reason == "NOT_FOUND"
    assert foreign.code == grpc.StatusCode.NOT_FOUND and foreign.reason == "NOT_FOUND"
