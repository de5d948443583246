import asyncio

import grpc
import pytest

from frontdesk import AsyncFrontdeskClient, FrontdeskError, RunEvent, TurnResult, event_kind


def run(coro):
    return asyncio.run(coro)


def test_async_send_message_streams_events_then_result(addr: str) -> None:
    async def main():
        async with AsyncFrontdeskClient(addr, timeout=10) as client:
            cid = (await client.start_conversation("intake")).conversation.conversation_id
            items = [item async for item in client.send_message(cid, "Hello async")]
            got = await client.get_conversation(cid)
            return items, got

    items, got = run(main())
    *events, result = items
    assert all(isinstance(e, RunEvent) for e in events)
    assert isinstance(result, TurnResult)
    started = [e.node for e in events if event_kind(e) == "node_started"]
    assert started == ["supervisor", "chat_agent"]
    assert event_kind(events[-1]) == "run_finished"
    assert result.reply.text.startswith("Hello from the scripted demo model.")
    assert got.conversation.turn_count == 1


def test_async_errors(addr: str) -> None:
    async def main():
        async with AsyncFrontdeskClient(addr, timeout=10) as client:
            cid = (await client.start_conversation()).conversation.conversation_id
            stream = client.send_message(cid, "")
            with pytest.raises(FrontdeskError) as bad:
                await stream.result()
            # asked again, the stream ends with the same error
            with pytest.raises(FrontdeskError) as again:
                await stream.result()
            assert again.value.code == grpc.StatusCode.INVALID_ARGUMENT
            with pytest.raises(FrontdeskError) as missing:
                await client.get_conversation("no-such-conversation")
            await client.delete_conversation(cid)
            return bad.value, missing.value

    bad, missing = run(main())
    assert bad.code == grpc.StatusCode.INVALID_ARGUMENT
    assert [v.field for v in bad.field_violations] == ["text"]
    assert missing.code == grpc.StatusCode.NOT_FOUND
    assert missing.reason == "NOT_FOUND"


def test_async_list_and_concurrent_turns(addr: str) -> None:
    async def main():
        async with AsyncFrontdeskClient(addr, timeout=10) as client:
            workflows = await client.list_workflows()
            cids = [
                (await client.start_conversation()).conversation.conversation_id
                for _ in range(3)
            ]
            results = await asyncio.gather(
                *(client.send_message(cid, f"turn {i}").result() for i, cid in enumerate(cids))
            )
            listed = []
            async for c in client.iter_conversations("intake", page_size=50):
                listed.append(c.conversation_id)
                if set(cids) <= set(listed):
                    break
            return workflows, cids, results, listed

    workflows, cids, results, listed = run(main())
    assert "intake" in [w.name for w in workflows]
    assert [r.conversation.conversation_id for r in results] == cids
    assert set(cids) <= set(listed)
