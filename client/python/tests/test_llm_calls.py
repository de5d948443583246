"""ListLlmCalls paging against an in-process fake WorkflowService, for what a live turn's two
calls cannot show (many pages, the requests as sent); test_client.py's
test_list_llm_calls_of_a_turn checks the wrappers against the server of scripts/sdk-tests.sh,
which records calls. The fake serves one thread's calls, the most recent first, in pages and
records each request it receives."""

from __future__ import annotations

import asyncio
import threading
from concurrent import futures
from typing import Any, Iterator, List, Tuple

import grpc
import pytest

from frontdesk import AsyncFrontdeskClient, FrontdeskClient, FrontdeskError, LlmCall
from frontdesk.v1 import workflow_pb2 as pb
from frontdesk.v1 import workflow_pb2_grpc

THREAD = "conv-llm"


class LlmCallsFake(workflow_pb2_grpc.WorkflowServiceServicer):
    """Pages over the calls of THREAD: a page holds ``page_size`` calls (0 means 50) from the
    offset its token names ("<thread>/after-<n>"), or at most ``cut_at`` when that is set (as
    the server ends a page at about 3 MiB of prompts and replies). A token that does not decode
    is INVALID_ARGUMENT and another thread NOT_FOUND, as the server answers. With
    ``forge_next`` the token it hands out is "forged", which it then refuses."""

    def __init__(self, count: int) -> None:
        self.lock = threading.Lock()
        # Numbered down so that call-1 is the oldest: the server lists the most recent first.
        self.calls = [
            pb.LlmCall(run_id=f"run-{i}", node="chat_agent", purpose=f"call-{i}",
                       model="scripted", prompt_tokens=10 * i, completion_tokens=i)
            for i in range(count, 0, -1)
        ]
        self.cut_at = 0
        self.forge_next = False
        self.requests: List[pb.ListLlmCallsRequest] = []

    def ListLlmCalls(self, request: Any, context: grpc.ServicerContext) -> Any:
        with self.lock:
            self.requests.append(request)
        if request.thread_id != THREAD:
            context.abort(grpc.StatusCode.NOT_FOUND, f"thread {request.thread_id} not found")
        start = 0
        if request.page_token:
            head, _, n = request.page_token.partition(f"{THREAD}/after-")
            if head or not n.isdigit() or not 0 < int(n) <= len(self.calls):
                context.abort(grpc.StatusCode.INVALID_ARGUMENT, "page_token: not a token")
            start = int(n)
        size = request.page_size or 50
        if self.cut_at:
            size = min(size, self.cut_at)
        end = min(start + size, len(self.calls))
        response = pb.ListLlmCallsResponse(calls=self.calls[start:end], total_calls=len(self.calls))
        response.total_usage.prompt_tokens = sum(c.prompt_tokens for c in self.calls)
        response.total_usage.completion_tokens = sum(c.completion_tokens for c in self.calls)
        if end < len(self.calls):
            response.next_page_token = "forged" if self.forge_next else f"{THREAD}/after-{end}"
        return response

    def sent(self) -> List[Tuple[str, int, str]]:
        """(thread, page size, token) of each request received."""
        with self.lock:
            return [(r.thread_id, r.page_size, r.page_token) for r in self.requests]


def serve(count: int) -> Iterator[LlmCallsFake]:
    servicer = LlmCallsFake(count)
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=4))
    workflow_pb2_grpc.add_WorkflowServiceServicer_to_server(servicer, server)
    port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    servicer.addr = f"127.0.0.1:{port}"  # type: ignore[attr-defined]
    yield servicer
    server.stop(None)


@pytest.fixture
def five() -> Iterator[LlmCallsFake]:
    yield from serve(5)


@pytest.fixture
def empty() -> Iterator[LlmCallsFake]:
    yield from serve(0)


ALL = [f"call-{i}" for i in range(5, 0, -1)]


def purposes(calls: Any) -> List[str]:
    return [c.purpose for c in calls]


def test_list_llm_calls_sends_the_thread_page_size_and_token(five: LlmCallsFake) -> None:
    with FrontdeskClient(five.addr, retry=False) as client:  # type: ignore[attr-defined]
        page = client.list_llm_calls(THREAD, page_size=2)
        last = client.list_llm_calls(THREAD, page_size=3, page_token=page.next_page_token)
        everything = client.list_llm_calls(THREAD)
    assert isinstance(page, pb.ListLlmCallsResponse)
    assert purposes(page.calls) == ALL[:2] and page.next_page_token == f"{THREAD}/after-2"
    # The totals cover the whole thread, not the page.
    assert page.total_calls == 5
    assert (page.total_usage.prompt_tokens, page.total_usage.completion_tokens) == (150, 15)
    assert purposes(last.calls) == ALL[2:] and last.next_page_token == ""
    assert purposes(everything.calls) == ALL and everything.next_page_token == ""
    assert five.sent() == [
        (THREAD, 2, ""),
        (THREAD, 3, f"{THREAD}/after-2"),
        (THREAD, 0, ""),  # None: the server's page size
    ]


def test_a_refused_page_token_or_an_unknown_thread_raises(five: LlmCallsFake) -> None:
    with FrontdeskClient(five.addr, retry=False) as client:  # type: ignore[attr-defined]
        with pytest.raises(FrontdeskError) as refused:
            client.list_llm_calls(THREAD, page_token="forged")
        with pytest.raises(FrontdeskError) as unknown:
            client.list_llm_calls("conv-unknown")
    assert refused.value.code == grpc.StatusCode.INVALID_ARGUMENT
    assert unknown.value.code == grpc.StatusCode.NOT_FOUND


def test_iter_llm_calls_follows_next_page_token(five: LlmCallsFake) -> None:
    with FrontdeskClient(five.addr, retry=False) as client:  # type: ignore[attr-defined]
        got = list(client.iter_llm_calls(THREAD, page_size=2))
    assert all(isinstance(c, LlmCall) for c in got)
    assert purposes(got) == ALL
    assert five.sent() == [
        (THREAD, 2, ""),
        (THREAD, 2, f"{THREAD}/after-2"),
        (THREAD, 2, f"{THREAD}/after-4"),
    ]


def test_iter_llm_calls_reads_on_past_a_short_page(five: LlmCallsFake) -> None:
    # A page the server ends early (its size limit) still has a token: the iterator goes on by
    # the token, not by the page's length.
    five.cut_at = 2
    with FrontdeskClient(five.addr, retry=False) as client:  # type: ignore[attr-defined]
        got = purposes(client.iter_llm_calls(THREAD))
    assert got == ALL
    assert [s[2] for s in five.sent()] == ["", f"{THREAD}/after-2", f"{THREAD}/after-4"]


def test_iter_llm_calls_fetches_no_page_it_is_not_asked_for(five: LlmCallsFake) -> None:
    with FrontdeskClient(five.addr, retry=False) as client:  # type: ignore[attr-defined]
        calls = client.iter_llm_calls(THREAD, page_size=2)
        assert five.sent() == []  # lazy: nothing is sent before the first item is asked for
        first = [next(calls).purpose for _ in range(3)]
    assert first == ALL[:3]
    assert five.sent() == [(THREAD, 2, ""), (THREAD, 2, f"{THREAD}/after-2")]


def test_iter_llm_calls_raises_the_failure_after_the_pages_before(five: LlmCallsFake) -> None:
    five.forge_next = True
    got: List[str] = []
    with FrontdeskClient(five.addr, retry=False) as client:  # type: ignore[attr-defined]
        with pytest.raises(FrontdeskError) as refused:
            for call in client.iter_llm_calls(THREAD, page_size=2):
                got.append(call.purpose)
    assert got == ALL[:2]
    assert refused.value.code == grpc.StatusCode.INVALID_ARGUMENT
    assert [s[2] for s in five.sent()] == ["", "forged"]


def test_iter_llm_calls_of_a_thread_without_calls_is_one_call(empty: LlmCallsFake) -> None:
    with FrontdeskClient(empty.addr, retry=False) as client:  # type: ignore[attr-defined]
        assert list(client.iter_llm_calls(THREAD)) == []
    assert empty.sent() == [(THREAD, 0, "")]


def test_async_list_and_iter_llm_calls(five: LlmCallsFake) -> None:
    async def main() -> Tuple[Any, List[str]]:
        async with AsyncFrontdeskClient(five.addr, retry=False) as client:  # type: ignore[attr-defined]
            page = await client.list_llm_calls(THREAD, page_size=4)
            every = [c.purpose async for c in client.iter_llm_calls(THREAD, page_size=2)]
            return page, every

    page, every = asyncio.run(main())
    assert isinstance(page, pb.ListLlmCallsResponse)
    assert purposes(page.calls) == ALL[:4] and page.next_page_token == f"{THREAD}/after-4"
    assert page.total_calls == 5
    assert every == ALL
    assert five.sent() == [
        (THREAD, 4, ""),
        (THREAD, 2, ""),
        (THREAD, 2, f"{THREAD}/after-2"),
        (THREAD, 2, f"{THREAD}/after-4"),
    ]


def test_async_iter_llm_calls_raises_the_failure(five: LlmCallsFake) -> None:
    five.forge_next = True

    async def main() -> Tuple[List[str], FrontdeskError]:
        got: List[str] = []
        async with AsyncFrontdeskClient(five.addr, retry=False) as client:  # type: ignore[attr-defined]
            try:
                async for call in client.iter_llm_calls(THREAD, page_size=3):
                    got.append(call.purpose)
            except FrontdeskError as e:
                return got, e
        raise AssertionError("the forged token was not refused")

    got, error = asyncio.run(main())
    assert got == ALL[:3]
    assert error.code == grpc.StatusCode.INVALID_ARGUMENT
    assert five.sent() == [(THREAD, 3, ""), (THREAD, 3, "forged")]
