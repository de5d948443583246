import assert from "node:assert/strict";
import { test } from "node:test";

import { FrontdeskError } from "@frontdesk/client";

/**
 * FRONTDESK_ADDR (host:port) names a running frontdesk-server with the scripted demo model
 * (scripts/sdk-tests.sh starts one). Without it the live tests are skipped, unless
 * FRONTDESK_REQUIRE_SERVER=1 (set by the script), when they fail instead.
 */
export const addr = process.env.FRONTDESK_ADDR ?? "";
export const baseUrl = `http://${addr}`;

export function liveTest(name: string, fn: () => Promise<void>): void {
  if (addr === "" && process.env.FRONTDESK_REQUIRE_SERVER === "1") {
    test(name, () => {
      throw new Error("FRONTDESK_ADDR is not set but FRONTDESK_REQUIRE_SERVER=1");
    });
  } else {
    test(name, { skip: addr === "" ? "FRONTDESK_ADDR not set" : false }, fn);
  }
}

/** The `FrontdeskError` a call fails with; fails the test if it succeeds or fails otherwise. */
export async function rejection(p: Promise<unknown>): Promise<FrontdeskError> {
  try {
    await p;
  } catch (e) {
    assert.ok(e instanceof FrontdeskError, `expected FrontdeskError, got ${String(e)}`);
    return e;
  }
  assert.fail("expected the call to fail");
}
