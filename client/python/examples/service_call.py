"""A customer-service phone call on the ``service_call`` workflow: start the call, say the
customer's lines one by one and print, per turn, the agent's reply, the nodes that ran, the tool
calls (arguments, result or error, latency) and the node the call is at; at the end the call's
context and token counts and, once the call was hung up, that a further message is refused with
FAILED_PRECONDITION, reason CONVERSATION_ENDED.

    python examples/service_call.py [HOST:PORT] [--turns N]

The address defaults to $FRONTDESK_ADDR, then 127.0.0.1:50051; $FRONTDESK_KEY, when set, is
the API key. ``--turns N`` says at most the first N customer lines (default: all of them, until
the call ends).

A real model drives the whole call: the greeting, the customer's issue, their contact details,
the customer record, the task, the booking and the hangup. The scripted demo model
(``--model-provider scripted --model-script tests/fixtures/demo-script.json``) cannot: after
every node with branching conditions, GREET_CUSTOMER included, the navigator must name one of
that node's children, which no standing answer can do for every node, so already the first turn
fails (INTERNAL, "node navigator failed"). Against it run ``--turns 0``: the call is started and
its initial state shown (scripts/sdk-tests.sh does so).
"""

import argparse
import json
import os
import sys
from typing import Dict, List, Optional

from frontdesk import (
    CONVERSATION_ENDED,
    FrontdeskClient,
    FrontdeskError,
    RunEvent,
    ServiceCallState,
    TurnResult,
    event_kind,
    service_call_context,
    service_call_state,
)

# The customer's side of a short call (a drywall repair), one line per turn.
CUSTOMER_LINES = [
    "Hello, I need help with drywall repair",
    "There is a hole in my living room wall",
    "It happened yesterday when I moved a cupboard",
    "Thanks, that is good to hear",
    "Sure",
    "I'm John Doe, my number is 555-1234",
    "Yes please, book the technician",
    "Great, thank you",
    "No, that's all",
    "Bye",
]

# Graph nodes of the workflow that are not nodes of the flow configuration.
NOT_FLOW_NODES = {"receive", "navigator"}


def seconds(duration) -> str:  # a google.protobuf.Duration
    ms = duration.seconds * 1000 + duration.nanos / 1e6
    return f"{ms:.0f} ms" if ms >= 1 else f"{ms:.2f} ms"


def print_turn(events: List[RunEvent], result: Optional[TurnResult]) -> None:
    """The nodes that ran and the tool calls of one turn, then the reply and the current node."""
    nodes = [e.node for e in events if event_kind(e) == "node_started" and e.node not in NOT_FLOW_NODES]
    print(f"  nodes: {' -> '.join(nodes) if nodes else '(none)'}")
    called: Dict[str, RunEvent] = {}
    for e in events:
        kind = event_kind(e)
        if kind == "tool_called":
            called[e.tool_called.call_id] = e
        elif kind == "tool_returned":
            t = e.tool_returned
            call = called.pop(t.call_id, None)
            args = call.tool_called.arguments_json if call is not None else "?"
            outcome = f"error {t.result_json}" if t.is_error else t.result_json
            print(f"  tool [{e.node}] {t.name}({args}) -> {outcome} ({seconds(t.latency)})")
    for call in called.values():
        print(f"  tool [{call.node}] {call.tool_called.name}({call.tool_called.arguments_json}) -> no result")
    if result is None:
        return
    state = service_call_state(result.conversation)
    reply = result.reply.text if result.reply.text else "(no reply)"
    print(f"agent ({result.reply.node or '-'}): {reply}")
    if state is not None:
        print(f"  current node: {state.current_node or '(none)'}")
        if state.call_ended:
            print("  the call has ended")


def print_state(state: ServiceCallState) -> None:
    print(f"current node: {state.current_node or '(none)'}")
    print(f"node traversal path: {' -> '.join(state.node_traversal_path) or '(none)'}")
    print(f"missing mandatory fields: {', '.join(state.missing_mandatory_fields) or 'none'}")
    print("context: " + json.dumps(service_call_context(state), indent=2, sort_keys=True))
    print(
        f"model calls: {state.model_calls}, tokens: {state.prompt_tokens} prompt"
        f" + {state.completion_tokens} completion"
    )
    print(f"call ended: {'yes' if state.call_ended else 'no'}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("addr", nargs="?", default=os.environ.get("FRONTDESK_ADDR", "127.0.0.1:50051"))
    parser.add_argument("--turns", type=int, default=len(CUSTOMER_LINES), help="customer lines to say")
    args = parser.parse_args()
    lines = CUSTOMER_LINES[: max(args.turns, 0)]

    with FrontdeskClient(args.addr, api_key=os.environ.get("FRONTDESK_KEY") or None) as client:
        started = client.start_conversation("service_call")
        call_id = started.conversation.conversation_id
        state = service_call_state(started.conversation)
        if state is None:
            print(f"error: conversation {call_id} has no service-call state", file=sys.stderr)
            return 1
        print(f"conversation {call_id}")
        print(f"agent ({started.welcome.node}): {started.welcome.text}")
        print(f"  current node: {state.current_node}")

        turns = 0
        for text in lines:
            print(f"customer: {text}")
            stream = client.send_message(call_id, text)
            result = None
            try:
                for item in stream:
                    if isinstance(item, TurnResult):
                        result = item
            except FrontdeskError as e:
                print_turn(stream.events, None)
                print(f"error: {e.code.name} reason={e.reason} {e.message}", file=sys.stderr)
                return 1
            print_turn(stream.events, result)
            turns += 1
            state = service_call_state(result.conversation) if result is not None else None
            if state is not None and state.call_ended:
                break

        # The call as the server keeps it: its context and what the models used.
        state = service_call_state(client.get_conversation(call_id).conversation)
        assert state is not None
        print(f"after {turns} turn(s):")
        print_state(state)
        if not state.call_ended:
            if turns < len(CUSTOMER_LINES):
                print(f"stopped after {turns} turn(s) (--turns); a real model drives the whole call")
            return 0

        # After the hangup the call takes no more messages.
        try:
            client.send_message(call_id, "Hello? Are you still there?").result()
        except FrontdeskError as e:
            if e.reason == CONVERSATION_ENDED:
                print(f"a further message is refused: {e.code.name} {e.reason}")
                return 0
            raise
        print("error: a message after the hangup was accepted", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
