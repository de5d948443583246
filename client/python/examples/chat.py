"""Start a conversation, send a turn and print the run's events as they arrive.

    python examples/chat.py [HOST:PORT] [MESSAGE]

The address defaults to $FRONTDESK_ADDR, then 127.0.0.1:50051; $FRONTDESK_KEY, when set, is
the API key.
"""

import os
import sys

from frontdesk import FrontdeskClient, FrontdeskError, RunEvent, event_kind


def main() -> int:
    addr = sys.argv[1] if len(sys.argv) > 1 else os.environ.get("FRONTDESK_ADDR", "127.0.0.1:50051")
    text = sys.argv[2] if len(sys.argv) > 2 else "Hi! What can you help me with?"
    with FrontdeskClient(addr, api_key=os.environ.get("FRONTDESK_KEY") or None) as client:
        started = client.start_conversation("intake")
        conversation_id = started.conversation.conversation_id
        print(f"conversation {conversation_id}")
        print(f"assistant: {started.welcome.text}")
        print(f"user: {text}")
        try:
            for item in client.send_message(conversation_id, text):
                if isinstance(item, RunEvent):
                    kind = event_kind(item)
                    if kind == "token_delta":
                        continue  # the streamed reply; the result carries it whole
                    print(f"  event {item.event_id:>2} {kind:<17} {item.node}")
                else:
                    print(f"assistant ({item.reply.node}): {item.reply.text}")
                    print(f"turns so far: {item.conversation.turn_count}")
        except FrontdeskError as e:
            print(f"error: {e.code.name} reason={e.reason} {e.message}", file=sys.stderr)
            return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
