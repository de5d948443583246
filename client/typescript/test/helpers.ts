import assert from "node:assert/strict";
import { test } from "node:test";

import { BinaryWriter, WireType } from "@bufbuild/protobuf/wire";
import { Code, ConnectError } from "@connectrpc/connect";

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

function errorInfo(reason: string): Uint8Array {
  const w = new BinaryWriter();
  w.tag(1, WireType.LengthDelimited).string(reason);
  w.tag(2, WireType.LengthDelimited).string("frontdesk.dev");
  w.tag(3, WireType.LengthDelimited).fork();
  w.tag(1, WireType.LengthDelimited).string("kind").tag(2, WireType.LengthDelimited).string("conversation");
  w.join();
  return w.finish();
}

function retryInfo(ms: number): Uint8Array {
  const w = new BinaryWriter();
  w.tag(1, WireType.LengthDelimited).fork();
  w.tag(1, WireType.Varint).int64(Math.floor(ms / 1000));
  w.tag(2, WireType.Varint).int32((ms % 1000) * 1e6);
  w.join();
  return w.finish();
}

/** A ConnectError as the server sends it: ErrorInfo `reason`, and RetryInfo `delayMs` when given. */
export function failure(code: Code, reason: string, delayMs?: number): ConnectError {
  const details = [{ type: "google.rpc.ErrorInfo", value: errorInfo(reason) }];
  if (delayMs !== undefined) details.push({ type: "google.rpc.RetryInfo", value: retryInfo(delayMs) });
  const err = new ConnectError("scripted failure", code);
  err.details = details; // encoded as given into grpc-status-details-bin
  return err;
}
