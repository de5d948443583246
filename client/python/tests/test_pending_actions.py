"""ListPendingActions paging against an in-process fake InvestigationService (no live
frontdesk-server needed): the fake serves a fixed list of actions in pages and records each
request it receives."""

from __future__ import annotations

import asyncio
import threading
from concurrent import futures
from typing import Any, Iterator, List, Tuple

import grpc
import pytest

from frontdesk import AsyncFrontdeskClient, FrontdeskClient, FrontdeskError
from frontdesk.v1 import investigation_pb2 as pb
from frontdesk.v1 import investigation_pb2_grpc


class PendingFake(investigation_pb2_grpc.InvestigationServiceServicer):
    """Pages over ``actions``: a page holds ``page_size`` actions (0 means 20) from the offset
    its token names ("after-<n>"); another token is INVALID_ARGUMENT, as the server answers.
    With ``forge_next`` the token it hands out is "forged", which it then refuses."""

    def __init__(self, count: int) -> None:
        self.lock = threading.Lock()
        self.actions = [
            pb.PendingAction(action_id=f"INV-{i}-changer", investigation_id=f"INV-{i}",
                             recipient_id="u003")
            for i in range(1, count + 1)
        ]
        self.forge_next = False
        self.requests: List[pb.ListPendingActionsRequest] = []

    def ListPendingActions(self, request: Any, context: grpc.ServicerContext) -> Any:
        with self.lock:
            self.requests.append(request)
        start = 0
        if request.page_token:
            head, _, n = request.page_token.partition("after-")
            if head or not n.isdigit() or not 0 < int(n) <= len(self.actions):
                context.abort(grpc.StatusCode.INVALID_ARGUMENT, "page_token: not a token")
            start = int(n)
        end = min(start + (request.page_size or 20), len(self.actions))
        response = pb.ListPendingActionsResponse(actions=self.actions[start:end])
        if end < len(self.actions):
            response.next_page_token = "forged" if self.forge_next else f"after-{end}"
        return response

    def sent(self) -> List[Tuple[str, int, int, str]]:
        """(recipient, status, page size, token) of each request received."""
        with self.lock:
            return [(r.recipient_id, r.status, r.page_size, r.page_token) for r in self.requests]


def serve(count: int) -> Iterator[PendingFake]:
    servicer = PendingFake(count)
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=4))
    investigation_pb2_grpc.add_InvestigationServiceServicer_to_server(servicer, server)
    port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    servicer.addr = f"127.0.0.1:{port}"  # type: ignore[attr-defined]
    yield servicer
    server.stop(None)


@pytest.fixture
def five() -> Iterator[PendingFake]:
    yield from serve(5)


@pytest.fixture
def empty() -> Iterator[PendingFake]:
    yield from serve(0)


ANSWERED = pb.PENDING_ACTION_STATUS_ANSWERED
UNSPECIFIED = pb.PENDING_ACTION_STATUS_UNSPECIFIED
ALL = [f"INV-{i}-changer" for i in range(1, 6)]


def ids(actions: Any) -> List[str]:
    return [a.action_id for a in actions]


def test_list_pending_actions_sends_the_page_size_and_token(five: PendingFake) -> None:
    with FrontdeskClient(five.addr, retry=False) as client:  # type: ignore[attr-defined]
        page = client.list_pending_actions("u003", "answered", page_size=2)
        last = client.list_pending_actions(
            "u003", "answered", page_size=3, page_token=page.next_page_token
        )
        everything = client.list_pending_actions()
    assert isinstance(page, pb.ListPendingActionsResponse)
    assert ids(page.actions) == ALL[:2] and page.next_page_token == "after-2"
    assert ids(last.actions) == ALL[2:] and last.next_page_token == ""
    assert ids(everything.actions) == ALL and everything.next_page_token == ""
    assert five.sent() == [
        ("u003", ANSWERED, 2, ""),
        ("u003", ANSWERED, 3, "after-2"),
        ("", UNSPECIFIED, 0, ""),  # None: everyone's, the server's size
    ]


def test_a_refused_page_token_raises(five: PendingFake) -> None:
    with FrontdeskClient(five.addr, retry=False) as client:  # type: ignore[attr-defined]
        with pytest.raises(FrontdeskError) as refused:
            client.list_pending_actions(page_token="forged")
    assert refused.value.code == grpc.StatusCode.INVALID_ARGUMENT


def test_iter_pending_actions_follows_next_page_token(five: PendingFake) -> None:
    with FrontdeskClient(five.addr, retry=False) as client:  # type: ignore[attr-defined]
        got = ids(client.iter_pending_actions("u003", "answered", page_size=2))
    assert got == ALL
    assert five.sent() == [
        ("u003", ANSWERED, 2, ""),
        ("u003", ANSWERED, 2, "after-2"),
        ("u003", ANSWERED, 2, "after-4"),
    ]


def test_iter_pending_actions_fetches_no_page_it_is_not_asked_for(five: PendingFake) -> None:
    with FrontdeskClient(five.addr, retry=False) as client:  # type: ignore[attr-defined]
        actions = client.iter_pending_actions("u003", page_size=2)
        assert five.sent() == []  # lazy: nothing is sent before the first item is asked for
        first = [next(actions).action_id for _ in range(3)]
    assert first == ALL[:3]
    assert five.sent() == [("u003", UNSPECIFIED, 2, ""), ("u003", UNSPECIFIED, 2, "after-2")]


def test_iter_pending_actions_raises_the_failure_after_the_pages_before(five: PendingFake) -> None:
    five.forge_next = True
    got: List[str] = []
    with FrontdeskClient(five.addr, retry=False) as client:  # type: ignore[attr-defined]
        with pytest.raises(FrontdeskError) as refused:
            for action in client.iter_pending_actions("u003", page_size=2):
                got.append(action.action_id)
    assert got == ALL[:2]
    assert refused.value.code == grpc.StatusCode.INVALID_ARGUMENT
    assert [s[3] for s in five.sent()] == ["", "forged"]


def test_iter_pending_actions_of_an_empty_list_is_one_call(empty: PendingFake) -> None:
    with FrontdeskClient(empty.addr, retry=False) as client:  # type: ignore[attr-defined]
        assert list(client.iter_pending_actions("u009", "answered")) == []
    assert empty.sent() == [("u009", ANSWERED, 0, "")]


def test_async_list_and_iter_pending_actions(five: PendingFake) -> None:
    async def main() -> Tuple[Any, List[str]]:
        async with AsyncFrontdeskClient(five.addr, retry=False) as client:  # type: ignore[attr-defined]
            page = await client.list_pending_actions("u003", "answered", page_size=4)
            every = [a.action_id async for a in client.iter_pending_actions(
                "u003", "answered", page_size=2)]
            return page, every

    page, every = asyncio.run(main())
    assert isinstance(page, pb.ListPendingActionsResponse)
    assert ids(page.actions) == ALL[:4] and page.next_page_token == "after-4"
    assert every == ALL
    assert five.sent() == [
        ("u003", ANSWERED, 4, ""),
        ("u003", ANSWERED, 2, ""),
        ("u003", ANSWERED, 2, "after-2"),
        ("u003", ANSWERED, 2, "after-4"),
    ]


def test_async_iter_pending_actions_raises_the_failure(five: PendingFake) -> None:
    five.forge_next = True

    async def main() -> Tuple[List[str], FrontdeskError]:
        got: List[str] = []
        async with AsyncFrontdeskClient(five.addr, retry=False) as client:  # type: ignore[attr-defined]
            try:
                async for action in client.iter_pending_actions(page_size=3):
                    got.append(action.action_id)
            except FrontdeskError as e:
                return got, e
        raise AssertionError("the forged token was not refused")

    got, error = asyncio.run(main())
    assert got == ALL[:3]
    assert error.code == grpc.StatusCode.INVALID_ARGUMENT
    assert five.sent() == [("", UNSPECIFIED, 3, ""), ("", UNSPECIFIED, 3, "forged")]
