"""ResearchService against the live server. The scripted demo model answers every research
purpose with a standing reply (tests/fixtures/demo-script.json): a plan of two research steps
("Find who invented CRISPR gene editing", "Find when the transistor was invented") and one
expert step, every critic approving ("Looks complete."), each researcher citing passage 0 of
the sample corpus's "crispr" document. So every question is answered on the first pass."""

import asyncio
import uuid

import grpc
import pytest

from frontdesk import (
    AsyncFrontdeskClient,
    CriticVerdict,
    ExpertAnswer,
    FrontdeskClient,
    FrontdeskError,
    OrchestratorMessage,
    Plan,
    Research,
    ResearchResult,
    RunEvent,
    event_kind,
)
from frontdesk.v1 import research_pb2 as pb

QUESTION = "Who invented CRISPR gene editing, and when was the transistor invented?"
STEPS = ["Find who invented CRISPR gene editing", "Find when the transistor was invented"]
CRITICS = ["critic_planner", "critic_researcher", "critic_researcher", "critic_expert"]


def question() -> str:
    """The question, made unique so that tests sharing the server tell their research apart."""
    return f"{QUESTION} (py {uuid.uuid4().hex[:8]})"


def test_a_question_is_answered_with_plan_results_and_critic_decisions(
    client: FrontdeskClient,
) -> None:
    text = question()
    stream = client.ask(text)
    items = list(stream)

    *progress, research = items
    assert isinstance(research, Research)
    assert stream.result() is research
    kinds = (RunEvent, OrchestratorMessage, Plan, ResearchResult, CriticVerdict, ExpertAnswer)
    assert all(isinstance(i, kinds) for i in progress)
    events = [i for i in progress if isinstance(i, RunEvent)]
    assert events == stream.events
    assert event_kind(events[0]) == "run_started"
    assert event_kind(events[-1]) == "run_finished"
    nodes = {e.node for e in events if event_kind(e) == "node_started"}
    assert {"planner", "researcher", "expert", "finalizer"} <= nodes

    # live: the plan, both results, every critic decision and the expert's answer
    [plan] = stream.plans
    assert list(plan.research_steps) == STEPS
    assert list(plan.expert_steps) == ["Combine the findings"]
    assert plan.attempt == 1
    assert sorted((r.step_id, r.step) for r in stream.results) == list(enumerate(STEPS))
    assert [v.critic for v in stream.critic_decisions] == CRITICS
    assert all(v.decision == pb.CRITIC_DECISION_APPROVE for v in stream.critic_decisions)
    assert all(v.feedback == "Looks complete." and v.retry_count == 0 for v in stream.critic_decisions)
    assert sorted(v.step_id for v in stream.critic_decisions if v.HasField("step_id")) == [0, 1]
    [expert] = stream.expert_answers
    assert expert.answer and expert.reasoning and expert.attempt == 1
    first = stream.messages[0]
    assert (first.sender, first.receiver, first.type) == ("orchestrator", "planner", "instruction")
    assert first.content.startswith("Develop a logical plan to answer:")
    researched = [m.step_id for m in stream.messages if m.receiver == "researcher"]
    assert sorted(researched) == [0, 1]
    # a plan comes before any result, every result before the expert's answer
    order = [type(i) for i in progress if not isinstance(i, (RunEvent, OrchestratorMessage))]
    assert order.index(Plan) < order.index(ResearchResult)
    assert max(i for i, t in enumerate(order) if t is ResearchResult) < order.index(ExpertAnswer)

    # the research: answered, with its results in plan order
    assert research.research_id.startswith("RES-")
    assert research.question == text
    assert research.corpus == "sample"
    assert research.outcome == pb.RESEARCH_OUTCOME_ANSWERED
    assert research.current_step == pb.RESEARCH_STEP_FINALIZER
    assert (research.retry_count, research.retry_limit) == (0, 5)
    assert list(research.plan.research_steps) == STEPS
    assert [(r.step_id, r.step) for r in research.results] == list(enumerate(STEPS))
    for result in research.results:
        assert result.answer and result.attempt == 1
        [citation] = result.citations
        assert (citation.document_id, citation.passage) == ("crispr", 0)
        assert citation.document_title and citation.text
    assert research.expert.answer == expert.answer
    assert research.final_answer.startswith("Scripted demo:")
    assert research.final_reasoning_trace
    assert not research.error and not research.error_component
    assert len(research.messages) == len(stream.messages)
    assert research.HasField("created_at") and research.HasField("updated_at")


def test_get_and_list_research(client: FrontdeskClient) -> None:
    asked = [client.ask(question()).result() for _ in range(2)]
    ids = [r.research_id for r in asked]

    got = client.get_research(ids[0])
    assert got.research_id == ids[0]
    assert got.outcome == pb.RESEARCH_OUTCOME_ANSWERED
    assert got.final_answer == asked[0].final_answer
    assert [r.step_id for r in got.results] == [0, 1]

    page = client.list_research(page_size=1)
    assert len(page.research) == 1 and page.next_page_token
    page2 = client.list_research(page_size=1, page_token=page.next_page_token)
    assert len(page2.research) == 1
    assert page2.research[0].research_id != page.research[0].research_id
    listed = [r.research_id for r in client.iter_research(page_size=50)]
    assert set(ids) <= set(listed)
    assert listed == sorted(listed), "ordered by research id"
    assert len(listed) == len(set(listed))
    with pytest.raises(FrontdeskError) as info:
        client.list_research(page_size=101)
    assert info.value.code == grpc.StatusCode.INVALID_ARGUMENT


def test_retry_limit_and_corpus_are_sent(client: FrontdeskClient) -> None:
    research = client.ask(question(), retry_limit=2, corpus="sample").result()
    assert research.outcome == pb.RESEARCH_OUTCOME_ANSWERED
    assert (research.retry_limit, research.corpus) == (2, "sample")


def test_invalid_questions_are_invalid_argument(client: FrontdeskClient) -> None:
    with pytest.raises(FrontdeskError) as info:
        client.ask("").result()
    assert info.value.code == grpc.StatusCode.INVALID_ARGUMENT
    assert info.value.reason == "INVALID_ARGUMENT"
    with pytest.raises(FrontdeskError) as info:
        client.ask(QUESTION, retry_limit=21).result()
    assert info.value.code == grpc.StatusCode.INVALID_ARGUMENT
    with pytest.raises(FrontdeskError) as info:
        client.ask(QUESTION, corpus=f"no-such-corpus-{uuid.uuid4().hex[:6]}").result()
    assert info.value.code == grpc.StatusCode.INVALID_ARGUMENT


def test_unknown_research_is_not_found(client: FrontdeskClient) -> None:
    with pytest.raises(FrontdeskError) as info:
        client.get_research(f"RES-py-unknown-{uuid.uuid4().hex[:8]}")
    assert info.value.code == grpc.StatusCode.NOT_FOUND
    assert info.value.reason == "NOT_FOUND"


def test_idempotent_ask_returns_the_first_outcome(client: FrontdeskClient) -> None:
    text = question()
    key = str(uuid.uuid4())
    first = client.ask(text, idempotency_key=key).result()
    again = client.ask(text, idempotency_key=key).result()
    assert again.research_id == first.research_id
    assert again.outcome == first.outcome
    assert again.final_answer == first.final_answer


def test_async_research(addr: str) -> None:
    async def main():
        async with AsyncFrontdeskClient(addr, timeout=10) as client:
            stream = client.ask(question())
            items = [item async for item in stream]
            rid = items[-1].research_id
            got = await client.get_research(rid)
            page = await client.list_research(page_size=1)
            listed = [r.research_id async for r in client.iter_research(page_size=50)]
            with pytest.raises(FrontdeskError) as empty:
                await client.ask("").result()
            with pytest.raises(FrontdeskError) as missing:
                await client.get_research(f"RES-py-unknown-{uuid.uuid4().hex[:8]}")
            return items, stream, got, page, listed, empty.value, missing.value

    items, stream, got, page, listed, empty, missing = asyncio.run(main())
    research = items[-1]
    assert isinstance(research, Research)
    assert research.outcome == pb.RESEARCH_OUTCOME_ANSWERED
    assert len(stream.plans) == 1 and len(stream.results) == 2 and len(stream.expert_answers) == 1
    assert [v.critic for v in stream.critic_decisions] == CRITICS
    assert stream.events and stream.messages
    assert got.research_id == research.research_id
    assert got.final_answer == research.final_answer
    assert len(page.research) == 1
    assert research.research_id in listed
    assert empty.code == grpc.StatusCode.INVALID_ARGUMENT
    assert missing.code == grpc.StatusCode.NOT_FOUND
