"""InvestigationService against the live server. The scripted demo model answers every
investigation purpose with a standing reply (tests/fixtures/demo-script.json); the changer's
claim it extracts is always "I covered for u006, on vacation", which holds for a change made
on 2025-11-10. The server is shared with the other SDK suites and an investigation exists once
per mutation, so every test investigates inline mutations with fresh ids."""

import asyncio
import datetime
import threading
import uuid

import grpc
import pytest

from frontdesk import (
    AgentMessage,
    AsyncFrontdeskClient,
    FrontdeskClient,
    FrontdeskError,
    HrMutation,
    Investigation,
    RunEvent,
    StatusChange,
    event_kind,
)
from frontdesk.v1 import investigation_pb2 as pb

from cancelling import cancel_inside_loop

S = pb.InvestigationStatus
CHANGED_AT = datetime.datetime(2025, 11, 10, 14, 30, tzinfo=datetime.timezone.utc)


def unauthorised() -> HrMutation:
    """Mutation 1002's change, with a fresh id: u003 is not authorised for Payroll at Admin."""
    return HrMutation(
        mutation_id=f"py-{uuid.uuid4().hex[:12]}",
        changer_id="u003",
        target_user_id="u007",
        system="Payroll",
        access_level="Admin",
        change_type="salary_change",
        description="Raised monthly salary by 4%",
        changed_at=CHANGED_AT,
    )


def authorised() -> HrMutation:
    """Mutation 1001's change, with a fresh id: u002's role allows HRPortal at Write."""
    return HrMutation(
        mutation_id=f"py-{uuid.uuid4().hex[:12]}",
        changer_id="u002",
        target_user_id="u003",
        system="HRPortal",
        access_level="Write",
        change_type="address_change",
        description="Updated home address",
        changed_at=datetime.datetime(2025, 11, 10, 9, 0, tzinfo=datetime.timezone.utc),
    )


def statuses(investigation: Investigation) -> list:
    return [c.to for c in investigation.status_history]


def test_an_authorised_change_finishes_at_once(client: FrontdeskClient) -> None:
    mutation = authorised()
    stream = client.start_investigation(mutation)
    items = list(stream)

    *progress, investigation = items
    assert isinstance(investigation, Investigation)
    assert stream.result() is investigation
    assert all(isinstance(i, (RunEvent, AgentMessage, StatusChange)) for i in progress)
    events = [i for i in progress if isinstance(i, RunEvent)]
    assert events == stream.events
    assert event_kind(events[0]) == "run_started"
    assert event_kind(events[-1]) == "run_finished"
    assert [m.action for m in stream.messages] == [
        pb.AGENT_ACTION_CHECK_RIGHTS,
        pb.AGENT_ACTION_CHECK_RIGHTS_RESULT,
        pb.AGENT_ACTION_GENERATE_ADVISORY_REPORT,
        pb.AGENT_ACTION_ADVISORY_REPORT_RESULT,
    ]
    assert [c.to for c in stream.status_changes] == statuses(investigation)

    assert investigation.investigation_id == f"INV-{mutation.mutation_id}"
    assert investigation.mutation.mutation_id == mutation.mutation_id
    assert investigation.mutation.changed_at == mutation.changed_at
    assert investigation.finished
    assert investigation.status == S.Value("INVESTIGATION_STATUS_ADVISORY_REPORT_GENERATED")
    assert statuses(investigation) == [
        pb.INVESTIGATION_STATUS_INVESTIGATION_STARTED,
        pb.INVESTIGATION_STATUS_APPROVED,
        pb.INVESTIGATION_STATUS_ADVISORY_REPORT_GENERATED,
    ]
    assert investigation.rights_check.authorized
    assert investigation.report.recommendation == pb.RECOMMENDATION_ACCEPT
    assert investigation.report.summary
    assert not investigation.awaiting

    got = client.get_investigation(investigation.investigation_id)
    assert got.status == pb.INVESTIGATION_STATUS_ADVISORY_REPORT_GENERATED
    assert got.report.report_id == investigation.report.report_id

    # one investigation per mutation
    with pytest.raises(FrontdeskError) as info:
        client.start_investigation(mutation).result()
    assert info.value.code == grpc.StatusCode.ALREADY_EXISTS


def test_the_changer_and_the_manager_answer(client: FrontdeskClient) -> None:
    mutation = unauthorised()
    first = client.start_investigation(mutation).result()
    iid = first.investigation_id
    assert first.status == pb.INVESTIGATION_STATUS_AWAITING_USER_RESPONSE
    assert not first.finished
    assert not first.rights_check.authorized
    [action] = first.awaiting
    assert action.action_id == f"{iid}-changer"
    assert action.recipient_id == "u003"
    assert action.recipient_role == pb.RESPONDER_ROLE_CHANGER
    assert action.status == pb.PENDING_ACTION_STATUS_AWAITING
    # other suites' investigations may wait for u003 too: look for this one
    pending = client.iter_pending_actions("u003", page_size=100)
    assert action.action_id in [a.action_id for a in pending]
    assert action.action_id in [a.action_id for a in client.iter_pending_actions(page_size=100)]
    waiting = client.iter_investigations("awaiting_user_response", page_size=100)
    assert iid in [i.investigation_id for i in waiting]

    # the changer explains; the (scripted) claim holds, so the manager u001 is asked
    stream = client.respond(iid, action.action_id, "changer", "u003",
                            text="I stood in for Frank (u006), who was on vacation.")
    second = stream.result()
    assert second.status == pb.INVESTIGATION_STATUS_AWAITING_MANAGER_RESPONSE
    assert second.claim.valid
    assert second.claim.covered_user_id == "u006"
    [manager] = second.awaiting
    assert manager.action_id == f"{iid}-manager"
    assert manager.recipient_id == "u001"
    assert manager.recipient_role == pb.RESPONDER_ROLE_MANAGER
    still = client.iter_pending_actions("u003", page_size=100)
    assert action.action_id not in [a.action_id for a in still]
    answered = client.iter_pending_actions("u003", "answered", page_size=100)
    assert action.action_id in [a.action_id for a in answered]

    third = client.respond(iid, manager.action_id, "manager", "u001",
                           text="Confirmed with the team.", decision="approve").result()
    assert third.finished
    assert third.status == pb.INVESTIGATION_STATUS_ADVISORY_REPORT_GENERATED
    assert statuses(third) == [
        pb.INVESTIGATION_STATUS_INVESTIGATION_STARTED,
        pb.INVESTIGATION_STATUS_CLARIFICATION_REQUESTED,
        pb.INVESTIGATION_STATUS_AWAITING_USER_RESPONSE,
        pb.INVESTIGATION_STATUS_MANAGER_VERIFICATION_REQUESTED,
        pb.INVESTIGATION_STATUS_AWAITING_MANAGER_RESPONSE,
        pb.INVESTIGATION_STATUS_APPROVED,
        pb.INVESTIGATION_STATUS_ADVISORY_REPORT_GENERATED,
    ]
    assert third.manager.decision == pb.MANAGER_DECISION_APPROVE
    assert third.manager.manager_id == "u001"
    assert third.report.recommendation == pb.RECOMMENDATION_ACCEPT

    # a second answer to an answered action
    with pytest.raises(FrontdeskError) as info:
        client.respond(iid, manager.action_id, "manager", "u001", decision="deny").result()
    assert info.value.code == grpc.StatusCode.FAILED_PRECONDITION
    assert info.value.reason == "INTERRUPT_ANSWERED"

    # the audit trail reconstructs the status history; entries are numbered from 1
    trail = client.get_audit_trail(iid)
    assert [e.seq for e in trail] == list(range(1, len(trail) + 1))
    assert all(e.investigation_id == iid for e in trail)
    changes = [e.status_change.to for e in trail if e.WhichOneof("entry") == "status_change"]
    assert changes == statuses(third)
    replies = [e.reply for e in trail if e.WhichOneof("entry") == "reply"]
    assert [(r.responder_id, r.role) for r in replies] == [
        ("u003", pb.RESPONDER_ROLE_CHANGER),
        ("u001", pb.RESPONDER_ROLE_MANAGER),
    ]
    # one exchange by its correlation id: the changer's reply and the notification
    exchange_id = next(e.correlation_id for e in trail if e.WhichOneof("entry") == "reply")
    exchange = client.get_audit_trail(correlation_id=exchange_id)
    kinds = {e.WhichOneof("entry") for e in exchange}
    assert {"reply", "notification"} <= kinds
    assert all(e.correlation_id == exchange_id for e in exchange)
    with pytest.raises(ValueError):
        client.get_audit_trail()

    # a watch of a finished investigation sends the trail and ends
    with client.watch_investigation(iid) as watch:
        watched = list(watch)
    assert [e.seq for e in watched] == [e.seq for e in trail]
    assert watch.entries == watched
    assert list(client.watch_investigation(iid, after_seq=len(trail) - 1))[0].seq == len(trail)


def test_a_watch_follows_the_investigation_to_its_report(
    client: FrontdeskClient, addr: str
) -> None:
    first = client.start_investigation(unauthorised()).result()
    iid = first.investigation_id
    seen = len(client.get_audit_trail(iid))
    watched: list = []
    errors: list = []

    def watcher() -> None:
        try:
            with FrontdeskClient(addr) as other:
                watched.extend(other.watch_investigation(iid, after_seq=seen, timeout=30))
        except Exception as e:  # pragma: no cover - reported below
            errors.append(e)

    thread = threading.Thread(target=watcher)
    thread.start()
    second = client.respond(
        iid, f"{iid}-changer", "changer", "u003", text="Covering for u006."
    ).result()
    manager = second.awaiting[0].action_id
    client.respond(iid, manager, "manager", "u001", decision="approve").result()
    thread.join(30)
    assert not thread.is_alive() and not errors
    assert watched[0].seq == seen + 1
    last = watched[-1]
    assert last.WhichOneof("entry") == "status_change"
    assert last.status_change.to == pb.INVESTIGATION_STATUS_ADVISORY_REPORT_GENERATED


def test_a_wrong_responder_is_permission_denied(client: FrontdeskClient) -> None:
    iid = client.start_investigation(unauthorised()).result().investigation_id
    action_id = f"{iid}-changer"
    # the manager may not answer the changer's question, nor the changer as a manager
    with pytest.raises(FrontdeskError) as info:
        client.respond(iid, action_id, "changer", "u001", text="it was me").result()
    assert info.value.code == grpc.StatusCode.PERMISSION_DENIED
    assert info.value.reason == "WRONG_RESPONDER"
    with pytest.raises(FrontdeskError) as info:
        client.respond(iid, action_id, "manager", "u003", decision="approve").result()
    assert info.value.code == grpc.StatusCode.PERMISSION_DENIED
    assert info.value.reason == "WRONG_RESPONDER"
    # the action still awaits its reply
    assert client.get_investigation(iid).status == pb.INVESTIGATION_STATUS_AWAITING_USER_RESPONSE
    with pytest.raises(ValueError):
        client.respond(iid, action_id, "auditor", "u003", text="x")


def test_unknown_investigations_and_mutations_are_not_found(client: FrontdeskClient) -> None:
    unknown = f"INV-py-unknown-{uuid.uuid4().hex[:8]}"
    with pytest.raises(FrontdeskError) as info:
        client.get_investigation(unknown)
    assert info.value.code == grpc.StatusCode.NOT_FOUND
    assert info.value.reason == "NOT_FOUND"
    with pytest.raises(FrontdeskError) as info:
        client.respond(unknown, f"{unknown}-changer", "changer", "u003", text="x").result()
    assert info.value.code == grpc.StatusCode.NOT_FOUND
    with pytest.raises(FrontdeskError) as info:
        client.start_investigation(f"py-no-such-mutation-{uuid.uuid4().hex[:8]}").result()
    assert info.value.code == grpc.StatusCode.NOT_FOUND
    assert info.value.reason == "NOT_FOUND"


def test_invalid_inline_mutation_is_invalid_argument(client: FrontdeskClient) -> None:
    mutation = authorised()
    mutation.access_level = "Root"
    with pytest.raises(FrontdeskError) as info:
        client.start_investigation(mutation).result()
    assert info.value.code == grpc.StatusCode.INVALID_ARGUMENT
    assert [v.field for v in info.value.field_violations] == ["inline_mutation.access_level"]
    with pytest.raises(TypeError):
        client.start_investigation(1002)  # type: ignore[arg-type]


def test_list_investigations_pages(client: FrontdeskClient) -> None:
    ids = {client.start_investigation(authorised()).result().investigation_id for _ in range(2)}
    page = client.list_investigations(page_size=1)
    assert len(page.investigations) == 1 and page.next_page_token
    page2 = client.list_investigations(page_size=1, page_token=page.next_page_token)
    assert len(page2.investigations) == 1
    assert page2.investigations[0].investigation_id != page.investigations[0].investigation_id
    finished = client.iter_investigations("advisory_report_generated", page_size=50)
    assert ids <= {i.investigation_id for i in finished}
    with pytest.raises(ValueError):
        client.list_investigations("open")


def test_idempotent_start_replays(client: FrontdeskClient) -> None:
    mutation = authorised()
    key = str(uuid.uuid4())
    first = client.start_investigation(mutation, key).result()
    stream = client.start_investigation(mutation, idempotency_key=key)
    again = stream.result()
    assert again.investigation_id == first.investigation_id
    assert again.status == first.status
    assert stream.messages == []  # replayed, not run again


def test_async_investigation(addr: str) -> None:
    async def main():
        async with AsyncFrontdeskClient(addr, timeout=10) as client:
            stream = client.start_investigation(unauthorised())
            items = [item async for item in stream]
            iid = items[-1].investigation_id
            pending = [a async for a in client.iter_pending_actions("u003", page_size=100)]
            with pytest.raises(FrontdeskError) as wrong:
                await client.respond(iid, f"{iid}-changer", "changer", "u002", text="me").result()
            second = await client.respond(iid, f"{iid}-changer", "changer", "u003",
                                          text="Covering for u006.").result()
            third = await client.respond(iid, second.awaiting[0].action_id, "manager", "u001",
                                         decision="approve").result()
            got = await client.get_investigation(iid)
            trail = await client.get_audit_trail(iid)
            watched = [e async for e in client.watch_investigation(iid)]
            # after cancel() the watch raises CANCELLED, not asyncio.CancelledError, and hands
            # out none of the entries that had already arrived
            cancelled = client.watch_investigation(iid)
            stopped = await cancel_inside_loop(cancelled)
            assert stopped.code == grpc.StatusCode.CANCELLED
            assert [e.seq for e in cancelled.entries] == [1]
            listed = [i.investigation_id async for i in client.iter_investigations(page_size=50)]
            with pytest.raises(FrontdeskError) as missing:
                await client.get_investigation(f"INV-py-unknown-{uuid.uuid4().hex[:8]}")
            return (items, stream, iid, pending, wrong.value, third, got, trail, watched, listed,
                    missing.value)

    (items, stream, iid, pending, wrong, third, got, trail, watched, listed,
     missing) = asyncio.run(main())
    assert isinstance(items[-1], Investigation)
    assert items[-1].status == pb.INVESTIGATION_STATUS_AWAITING_USER_RESPONSE
    assert stream.status_changes and stream.messages and stream.events
    assert f"{iid}-changer" in [a.action_id for a in pending]
    assert wrong.code == grpc.StatusCode.PERMISSION_DENIED and wrong.reason == "WRONG_RESPONDER"
    assert third.report.recommendation == pb.RECOMMENDATION_ACCEPT
    assert got.status == pb.INVESTIGATION_STATUS_ADVISORY_REPORT_GENERATED
    assert [e.seq for e in watched] == [e.seq for e in trail]
    assert iid in listed
    assert missing.code == grpc.StatusCode.NOT_FOUND and missing.reason == "NOT_FOUND"
