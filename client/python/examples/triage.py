"""Triage one customer message and print the ticket resolution, the run's events and the result.

    python examples/triage.py [HOST:PORT] [CUSTOMER_ID] [MESSAGE]

The address defaults to $FRONTDESK_ADDR, then 127.0.0.1:50051; the customer to CUST-001.
$FRONTDESK_KEY, when set, is the API key.
"""

import os
import sys

from frontdesk import FrontdeskClient, FrontdeskError, RunEvent, TicketResolution, event_kind
from frontdesk.v1 import triage_pb2


def main() -> int:
    addr = sys.argv[1] if len(sys.argv) > 1 else os.environ.get("FRONTDESK_ADDR", "127.0.0.1:50051")
    customer_id = sys.argv[2] if len(sys.argv) > 2 else "CUST-001"
    text = sys.argv[3] if len(sys.argv) > 3 else "I was charged twice for my subscription this month."
    key = os.environ.get("FRONTDESK_KEY") or None
    with FrontdeskClient(addr, api_key=key) as client:
        print(f"customer {customer_id}: {text}")
        try:
            for item in client.triage_ticket(customer_id, text, subject="Billing question"):
                if isinstance(item, TicketResolution):
                    kind = "continues" if item.matched_existing else "new"
                    print(f"ticket {item.ticket_id} ({kind})")
                elif isinstance(item, RunEvent):
                    kind = event_kind(item)
                    detail = item.tool_called.name if kind == "tool_called" else ""
                    print(f"  event {item.event_id:>2} {kind:<17} {item.node} {detail}".rstrip())
                else:
                    action = triage_pb2.RecommendedAction.Name(item.recommended_action)
                    status = triage_pb2.TicketStatus.Name(item.status)
                    print(f"result: {action} -> {status}")
                    print(f"suggested response: {item.suggested_response}")
            tickets = client.list_tickets(customer_id, page_size=5).tickets
            print(f"recent tickets: {', '.join(t.ticket_id for t in tickets)}")
        except FrontdeskError as e:
            print(f"error: {e.code.name} reason={e.reason} {e.message}", file=sys.stderr)
            return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
