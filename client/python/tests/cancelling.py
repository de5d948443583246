"""A cancel() from inside an asyncio listen stream's own loop, as the run and audit streams'
tests both make it."""

import asyncio

import pytest

from frontdesk import FrontdeskError


async def cancel_inside_loop(stream) -> FrontdeskError:
    """Iterates `stream` and cancels it at its first item, after a pause that lets the items the
    server sent with it arrive; returns the FrontdeskError the loop ended with, and fails the test
    if the loop ended any other way (asyncio.CancelledError included)."""
    with pytest.raises(FrontdeskError) as info:
        async for _ in stream:
            await asyncio.sleep(0.1)
            stream.cancel()
    return info.value
