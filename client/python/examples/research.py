"""Ask a research question and follow the critic loop live: each plan, each research result
with its citations, each critic decision and the expert's answer, then the final answer and the
reasoning trace.

    python examples/research.py [HOST:PORT] ["question"]

The address defaults to $FRONTDESK_ADDR, then 127.0.0.1:50051; $FRONTDESK_KEY, when set, is
the API key.
"""

import os
import sys

from frontdesk import (
    CriticVerdict,
    ExpertAnswer,
    FrontdeskClient,
    FrontdeskError,
    Plan,
    ResearchResult,
    RunEvent,
    event_kind,
)
from frontdesk.v1 import research_pb2 as res_pb

QUESTION = "Who invented CRISPR gene editing, and when was the transistor invented?"


def name(enum, value: int, prefix: str) -> str:
    """An enum value's name without its prefix: ANSWERED."""
    return enum.Name(value).removeprefix(prefix)


def main() -> int:
    addr = sys.argv[1] if len(sys.argv) > 1 else os.environ.get("FRONTDESK_ADDR", "127.0.0.1:50051")
    question = sys.argv[2] if len(sys.argv) > 2 else QUESTION
    with FrontdeskClient(addr, api_key=os.environ.get("FRONTDESK_KEY") or None) as client:
        try:
            print(f"question: {question}")
            stream = client.ask(question, timeout=120)
            for item in stream:
                if isinstance(item, RunEvent):
                    kind = event_kind(item)
                    if kind in ("node_started", "run_finished"):
                        print(f"  event {item.event_id:>3} {kind:<17} {item.node}".rstrip())
                elif isinstance(item, Plan):
                    print(f"plan (attempt {item.attempt}):")
                    for i, step in enumerate(item.research_steps):
                        print(f"  research {i}: {step}")
                    for i, step in enumerate(item.expert_steps):
                        print(f"  expert {i}: {step}")
                elif isinstance(item, ResearchResult):
                    print(f"result [step {item.step_id}] {item.step} (attempt {item.attempt}): "
                          f"{item.answer}")
                    for citation in item.citations:
                        print(f"  [{citation.document_id}#{citation.passage}] "
                              f"{citation.document_title}")
                elif isinstance(item, CriticVerdict):
                    decision = name(res_pb.CriticDecision, item.decision, "CRITIC_DECISION_")
                    print(f"{item.critic}: {decision} (retry {item.retry_count}) {item.feedback}")
                elif isinstance(item, ExpertAnswer):
                    print(f"expert (attempt {item.attempt}): {item.answer}")
            research = stream.result()
            outcome = name(res_pb.ResearchOutcome, research.outcome, "RESEARCH_OUTCOME_")
            print(f"research {research.research_id} -> {outcome} "
                  f"(retries {research.retry_count} of {research.retry_limit})")
            if research.error:
                print(f"error in {research.error_component}: {research.error}")
            print(f"final answer: {research.final_answer}")
            print(f"reasoning trace: {research.final_reasoning_trace}")
        except FrontdeskError as e:
            print(f"error: {e.code.name} reason={e.reason} {e.message}", file=sys.stderr)
            return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
