"""Live-server fixtures. FRONTDESK_ADDR (host:port) names a running frontdesk-server with the
scripted demo model (scripts/sdk-tests.sh starts one). Without it the tests are skipped,
unless FRONTDESK_REQUIRE_SERVER=1 (set by the script), when they fail instead."""

import os

import pytest

from frontdesk import FrontdeskClient


@pytest.fixture(scope="session")
def addr() -> str:
    value = os.environ.get("FRONTDESK_ADDR", "")
    if not value:
        if os.environ.get("FRONTDESK_REQUIRE_SERVER") == "1":
            pytest.fail("FRONTDESK_ADDR is not set but FRONTDESK_REQUIRE_SERVER=1")
        pytest.skip("FRONTDESK_ADDR not set: no live frontdesk-server to test against")
    return value


@pytest.fixture
def client(addr: str):
    with FrontdeskClient(addr, timeout=10) as c:
        yield c
