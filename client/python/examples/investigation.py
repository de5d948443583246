"""Investigate an HR mutation that was not authorised, answer as the changer and as the
manager, then print the advisory report and the audit trail.

    python examples/investigation.py [HOST:PORT]

The mutation is given inline with a fresh id (mutation 1002 of the sample HR data, as the
changer u003 made it: Payroll at Admin, which u003 is not authorised for), so the example can
run again and again on one server. The address defaults to $FRONTDESK_ADDR, then
127.0.0.1:50051; $FRONTDESK_KEY, when set, is the API key.
"""

import datetime
import os
import sys
import uuid

from frontdesk import (
    AgentMessage,
    FrontdeskClient,
    FrontdeskError,
    HrMutation,
    Investigation,
    InvestigationStream,
    PendingAction,
    RunEvent,
    StatusChange,
    event_kind,
)
from frontdesk.v1 import investigation_pb2 as inv_pb


def name(enum, value: int, prefix: str) -> str:
    """An enum value's name without its prefix: AWAITING_USER_RESPONSE."""
    return enum.Name(value).removeprefix(prefix)


def status(value: int) -> str:
    return name(inv_pb.InvestigationStatus, value, "INVESTIGATION_STATUS_")


def agent(value: int) -> str:
    return name(inv_pb.Agent, value, "AGENT_")


def follow(stream: InvestigationStream) -> Investigation:
    """Prints the run's progress as it arrives and returns the investigation."""
    for item in stream:
        if isinstance(item, RunEvent):
            kind = event_kind(item)
            if kind in ("node_started", "tool_called", "run_interrupted", "run_finished"):
                detail = item.tool_called.name if kind == "tool_called" else ""
                print(f"  event {item.event_id:>3} {kind:<17} {item.node} {detail}".rstrip())
        elif isinstance(item, AgentMessage):
            action = name(inv_pb.AgentAction, item.action, "AGENT_ACTION_")
            state = name(inv_pb.AgentMessageStatus, item.status, "AGENT_MESSAGE_STATUS_")
            print(f"  message {agent(item.sender)} -> {agent(item.receiver)}: {action} ({state})")
        elif isinstance(item, StatusChange):
            print(f"  status {status(getattr(item, 'from'))} -> {status(item.to)}")
    investigation = stream.result()
    print(f"investigation {investigation.investigation_id} -> {status(investigation.status)}")
    return investigation


def show_action(action: PendingAction) -> None:
    role = name(inv_pb.ResponderRole, action.recipient_role, "RESPONDER_ROLE_")
    print(f"pending action {action.action_id} for {action.recipient_id} ({role}): {action.subject}")


def main() -> int:
    addr = sys.argv[1] if len(sys.argv) > 1 else os.environ.get("FRONTDESK_ADDR", "127.0.0.1:50051")
    mutation = HrMutation(
        mutation_id=f"example-py-{uuid.uuid4().hex[:10]}",
        changer_id="u003",
        target_user_id="u007",
        system="Payroll",
        access_level="Admin",
        change_type="salary_change",
        description="Raised monthly salary by 4%",
        changed_at=datetime.datetime(2025, 11, 10, 14, 30, tzinfo=datetime.timezone.utc),
    )
    with FrontdeskClient(addr, api_key=os.environ.get("FRONTDESK_KEY") or None) as client:
        try:
            print(f"mutation {mutation.mutation_id}: {mutation.changer_id} changed "
                  f"{mutation.system} at {mutation.access_level}")
            investigation = follow(client.start_investigation(mutation))
            iid = investigation.investigation_id

            # The changer is asked why: find the notification among u003's pending actions.
            # The list is paged, oldest first: iter_pending_actions reads every page.
            pending = client.iter_pending_actions("u003", page_size=100)
            changer = next(a for a in pending if a.investigation_id == iid)
            show_action(changer)
            investigation = follow(client.respond(
                iid, changer.action_id, "changer", changer.recipient_id,
                text="I stood in for Frank (u006), who was on vacation.",
            ))

            # The claim holds, so the changer's manager is asked to approve or deny.
            manager = investigation.awaiting[0]
            show_action(manager)
            investigation = follow(client.respond(
                iid, manager.action_id, "manager", manager.recipient_id,
                text="Confirmed with the team.", decision="approve",
            ))

            report = investigation.report
            recommendation = name(inv_pb.Recommendation, report.recommendation, "RECOMMENDATION_")
            print(f"report {report.report_id}: {recommendation}")
            print(f"summary: {report.summary}")
            trail = client.get_audit_trail(iid)
            print(f"audit trail ({len(trail)} entries):")
            for entry in trail:
                print(f"  {entry.seq:>3} {entry.actor:<30} {entry.WhichOneof('entry')}")
        except FrontdeskError as e:
            print(f"error: {e.code.name} reason={e.reason} {e.message}", file=sys.stderr)
            return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
