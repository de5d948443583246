// Retries, error details and re-attaching, against a tiny in-process fake gRPC server (no live
// frontdesk-server needed): the fake answers StartConversation, SendMessage and SubscribeRun as
// each test scripts it.
import assert from "node:assert/strict";
import * as http2 from "node:http2";
import type { AddressInfo } from "node:net";
import { afterEach, beforeEach, test } from "node:test";

import { create } from "@bufbuild/protobuf";
import { Code } from "@connectrpc/connect";
import { connectNodeAdapter } from "@connectrpc/connect-node";

import {
  ConversationService,
  FrontdeskClient,
  NodeStartedSchema,
  RunEventSchema,
  RunFailedSchema,
  RunFinishedSchema,
  RunStartedSchema,
  WorkflowService,
  type RunEvent,
  type RetryPolicy,
  type StreamItem,
} from "@frontdesk/client";
import { failure, rejection } from "./helpers.js";

const RUN = "0b6a3d5e-2f7c-4b8e-9d1a-5c3e7f9a1b2d";
const LAST = 5;

function event(id: number): RunEvent {
  const kind: RunEvent["kind"] =
    id === 1
      ? { case: "runStarted", value: create(RunStartedSchema, { threadId: "c1", workflow: "intake" }) }
      : id === LAST
        ? { case: "runFinished", value: create(RunFinishedSchema) }
        : { case: "nodeStarted", value: create(NodeStartedSchema, { step: id }) };
  return create(RunEventSchema, {
    runId: RUN,
    eventId: BigInt(id),
    node: `n${id}`,
    time: { seconds: 1_700_000_000n, nanos: id },
    kind,
  });
}

interface Script {
  startFailures: number;
  delayMs: number | undefined;
  breakAfter: number;
  subscribeNotFound: boolean;
  /** SendMessage calls after the first answer ABORTED THREAD_BUSY (RetryInfo delayMs) until busyForMs has passed since the first (the run held by a replica that died). */
  busyForMs: number;
  /** SubscribeRun's last event is a RunFailed (FAILED_PRECONDITION CONVERSATION_ENDED), not a RunFinished. */
  runFails: boolean;
  startCalls: number[];
  sendCalls: number;
  sendTimes: number[];
  busyTimes: number[];
  subscribeCalls: bigint[];
}

let script: Script;
let server: http2.Http2Server;
let baseUrl = "";

beforeEach(async () => {
  script = {
    startFailures: 0,
    delayMs: 300,
    breakAfter: 0,
    subscribeNotFound: false,
    busyForMs: 0,
    runFails: false,
    startCalls: [],
    sendCalls: 0,
    sendTimes: [],
    busyTimes: [],
    subscribeCalls: [],
  };
  const handler = connectNodeAdapter({
    grpc: true,
    grpcWeb: false,
    connect: false,
    routes(router) {
      router.service(ConversationService, {
        startConversation() {
          script.startCalls.push(performance.now());
          if (script.startCalls.length <= script.startFailures) {
            throw failure(Code.Aborted, "THREAD_BUSY", script.delayMs);
          }
          return { conversation: { conversationId: "c1" } };
        },
        async *sendMessage() {
          script.sendCalls += 1;
          const n = script.sendCalls;
          const now = performance.now();
          script.sendTimes.push(now);
          if (n > 1 && now - (script.sendTimes[0] ?? now) < script.busyForMs) {
            script.busyTimes.push(now);
            throw failure(Code.Aborted, "THREAD_BUSY", script.delayMs);
          }
          for (let i = 1; i <= LAST; i++) {
            if (n === 1 && script.breakAfter > 0 && i > script.breakAfter) {
              throw failure(Code.Unavailable, "STORE_UNAVAILABLE");
            }
            yield { payload: { case: "event", value: event(i) } };
          }
          yield { payload: { case: "result", value: { runId: RUN, replayed: n > 1 } } };
        },
      });
      router.service(WorkflowService, {
        async *subscribeRun(req) {
          script.subscribeCalls.push(req.afterEventId);
          if (script.subscribeNotFound) throw failure(Code.NotFound, "NOT_FOUND");
          for (let i = Number(req.afterEventId) + 1; i <= LAST; i++) {
            const ev = event(i);
            if (i === LAST && script.runFails) {
              ev.kind = {
                case: "runFailed",
                value: create(RunFailedSchema, {
                  code: Code.FailedPrecondition,
                  message: "the conversation has ended",
                  reason: "CONVERSATION_ENDED",
                }),
              };
            }
            yield { event: ev };
          }
        },
      });
    },
  });
  server = http2.createServer(handler);
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  baseUrl = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
});

afterEach(async () => {
  await new Promise<void>((resolve) => server.close(() => resolve()));
});

const FAST: RetryPolicy = { initialBackoffMs: 10, maxBackoffMs: 20 };

async function withClient<T>(retry: RetryPolicy | boolean, fn: (c: FrontdeskClient) => Promise<T>): Promise<T> {
  const client = new FrontdeskClient({ baseUrl, retry, timeoutMs: 10_000 });
  try {
    return await fn(client);
  } finally {
    client.close();
  }
}

function ids(items: readonly StreamItem[]): (number | string)[] {
  return items.map((i) => (i.type === "event" ? Number(i.event.eventId) : i.type));
}

async function collect(stream: AsyncIterable<StreamItem>): Promise<StreamItem[]> {
  const out: StreamItem[] = [];
  for await (const item of stream) out.push(item);
  return out;
}

const WANT = [1, 2, 3, 4, 5, "result"];

test("ErrorInfo and RetryInfo are parsed into FrontdeskError", async () => {
  script.startFailures = 10;
  const err = await withClient(false, (c) => rejection(c.startConversation({ idempotencyKey: "k1" })));
  assert.equal(err.code, Code.Aborted);
  assert.equal(err.codeName, "ABORTED");
  assert.equal(err.reason, "THREAD_BUSY");
  assert.equal(err.domain, "frontdesk.dev");
  assert.deepEqual(err.errorMetadata, { kind: "conversation" });
  assert.equal(err.retryDelayMs, 300);
  assert.equal(err.retryable, true);
  assert.match(err.message, /retry after 300ms/);
  assert.equal(script.startCalls.length, 1);
});

test("an idempotent call retried on ABORTED waits the server's delay", async () => {
  script.startFailures = 2;
  const started = performance.now();
  const res = await withClient(FAST, (c) => c.startConversation({ idempotencyKey: "k1" }));
  const elapsed = performance.now() - started;
  assert.equal(res.conversation?.conversationId, "c1");
  assert.equal(script.startCalls.length, 3);
  for (let i = 1; i < script.startCalls.length; i++) {
    const gap = (script.startCalls[i] ?? 0) - (script.startCalls[i - 1] ?? 0);
    assert.ok(gap >= 280, `gap ${gap}ms is shorter than the RetryInfo delay`);
  }
  assert.ok(elapsed >= 580);
});

test("without RetryInfo the retry backs off by the policy", async () => {
  script.startFailures = 2;
  script.delayMs = undefined;
  const started = performance.now();
  await withClient(FAST, (c) => c.startConversation({ idempotencyKey: "k1" }));
  assert.ok(performance.now() - started < 500);
  assert.equal(script.startCalls.length, 3);
});

test("a call without an idempotency key is not retried", async () => {
  script.startFailures = 1;
  const err = await withClient(FAST, (c) => rejection(c.startConversation()));
  assert.equal(err.code, Code.Aborted);
  assert.equal(script.startCalls.length, 1);
});

test("retries can be switched off", async () => {
  script.startFailures = 1;
  await withClient(false, (c) => rejection(c.startConversation({ idempotencyKey: "k1" })));
  assert.equal(script.startCalls.length, 1);
});

test("attempts are bounded", async () => {
  script.startFailures = 10;
  script.delayMs = 10;
  const err = await withClient({ maxAttempts: 3 }, (c) => rejection(c.startConversation({ idempotencyKey: "k1" })));
  assert.equal(err.code, Code.Aborted);
  assert.equal(script.startCalls.length, 3);
});

test("a broken stream re-attaches with SubscribeRun, each event once", async () => {
  script.breakAfter = 3;
  await withClient(FAST, async (c) => {
    const stream = c.sendMessage("c1", "hi", { idempotencyKey: "k1" });
    assert.deepEqual(ids(await collect(stream)), WANT);
    assert.deepEqual(script.subscribeCalls, [3n]);
    // SubscribeRun yields no result: the call is re-issued with its key for the recorded one,
    // and the events it streams again are dropped.
    assert.equal(script.sendCalls, 2);
    assert.equal(stream.reattaches, 1);
    assert.equal(stream.attempts, 2);
    assert.deepEqual(stream.events.map((e) => Number(e.eventId)), [1, 2, 3, 4, 5]);
  });
});

test("a broken stream falls back to the call when SubscribeRun is NOT_FOUND", async () => {
  script.breakAfter = 2;
  script.subscribeNotFound = true;
  await withClient(FAST, async (c) => {
    const stream = c.sendMessage("c1", "hi", { idempotencyKey: "k1" });
    assert.deepEqual(ids(await collect(stream)), WANT);
    assert.deepEqual(script.subscribeCalls, [2n]);
    assert.equal(script.sendCalls, 2);
  });
});

// The stream broke (its replica died) and SubscribeRun cannot find the run elsewhere; the call
// re-issued with its key is ABORTED THREAD_BUSY with RetryInfo until the run is taken over. Every
// re-issue waits at least that delay and counts against maxAttempts.
test("a fallback to the call after SubscribeRun fails waits the RetryInfo", async () => {
  script.breakAfter = 2;
  script.subscribeNotFound = true;
  script.busyForMs = 300;
  const policy = { maxAttempts: 5, initialBackoffMs: 10, maxBackoffMs: 20 };
  await withClient(policy, async (c) => {
    const started = performance.now();
    const items = await collect(c.sendMessage("c1", "hi", { idempotencyKey: "k1" }));
    const elapsed = performance.now() - started;
    assert.deepEqual(ids(items), WANT);
    assert.ok(elapsed >= 300, `done after ${elapsed}ms: the RetryInfo delay (300ms) was not waited`);
  });
  assert.ok(script.busyTimes.length > 0);
  assert.ok(script.sendCalls <= policy.maxAttempts, `${script.sendCalls} send calls`);
  for (const at of script.sendTimes) {
    for (const busy of script.busyTimes) {
      assert.ok(!(at > busy && at - busy < 280), `a send call came ${at - busy}ms after a THREAD_BUSY`);
    }
  }
});

test("a fallback to the call after SubscribeRun fails counts against maxAttempts", async () => {
  script.breakAfter = 2;
  script.subscribeNotFound = true;
  script.busyForMs = 3_600_000;
  script.delayMs = 20;
  const err = await withClient({ maxAttempts: 3, initialBackoffMs: 10 }, (c) =>
    rejection(collect(c.sendMessage("c1", "hi", { idempotencyKey: "k1" }))),
  );
  assert.equal(err.code, Code.Aborted);
  assert.equal(err.reason, "THREAD_BUSY");
  assert.equal(script.sendCalls, 3);
});

test("a RunFailed that arrives through SubscribeRun keeps its reason and domain", async () => {
  script.breakAfter = 2;
  script.runFails = true;
  await withClient(FAST, async (c) => {
    const stream = c.sendMessage("c1", "hi", { idempotencyKey: "k1" });
    const err = await rejection(collect(stream));
    assert.equal(err.code, Code.FailedPrecondition);
    assert.equal(err.rawMessage, "the conversation has ended");
    assert.equal(err.reason, "CONVERSATION_ENDED");
    assert.equal(err.domain, "frontdesk.dev");
    assert.deepEqual(stream.events.map((e) => Number(e.eventId)), [1, 2, 3, 4, 5]);
  });
  assert.deepEqual(script.subscribeCalls, [2n]);
  assert.equal(script.sendCalls, 1);
});

test("without reattach a broken stream re-issues the call", async () => {
  script.breakAfter = 2;
  await withClient({ ...FAST, reattach: false }, async (c) => {
    const result = await c.sendMessage("c1", "hi", { idempotencyKey: "k1" }).result();
    assert.equal(result.runId, RUN);
    assert.deepEqual(script.subscribeCalls, []);
    assert.equal(script.sendCalls, 2);
  });
});

test("a broken stream without an idempotency key fails", async () => {
  script.breakAfter = 2;
  await withClient(FAST, async (c) => {
    const stream = c.sendMessage("c1", "hi");
    const err = await rejection(collect(stream));
    assert.equal(err.code, Code.Unavailable);
    assert.deepEqual(stream.events.map((e) => Number(e.eventId)), [1, 2]);
  });
  assert.equal(script.sendCalls, 1);
  assert.deepEqual(script.subscribeCalls, []);
});

test("a broken stream with retries off fails", async () => {
  script.breakAfter = 2;
  await withClient(false, (c) => rejection(collect(c.sendMessage("c1", "hi", { idempotencyKey: "k1" }))));
  assert.equal(script.sendCalls, 1);
  assert.deepEqual(script.subscribeCalls, []);
});

test("subscribeRun streams the events after the id given", async () => {
  await withClient(true, async (c) => {
    const events = await c.subscribeRun(RUN, { afterEventId: 2 }).all();
    assert.deepEqual(events.map((e) => Number(e.eventId)), [3, 4, 5]);
  });
});

test("subscribeRun hands out nothing after its signal aborts, and all() then throws CANCELLED", async () => {
  await withClient(true, async (c) => {
    const ac = new AbortController();
    const stream = c.subscribeRun(RUN, { signal: ac.signal });
    const err = await rejection(
      (async () => {
        for await (const _ of stream) ac.abort();
      })(),
    );
    assert.equal(err.code, Code.Canceled);
    // the fake sends all five at once: the four that had arrived are not handed out
    assert.deepEqual(stream.events.map((e) => Number(e.eventId)), [1]);
    assert.equal((await rejection(stream.all())).code, Code.Canceled);
  });
});

test("subscribeRun's all() never passes off part of the run as all of it", async () => {
  await withClient(true, async (c) => {
    const stopped = c.subscribeRun(RUN);
    for await (const _ of stopped) break;
    const cancelled = await rejection(stopped.all());
    assert.equal(cancelled.code, Code.Canceled);
    assert.match(cancelled.message, /stopped before its end/);
    assert.equal(stopped.events.length, 1);

    script.subscribeNotFound = true;
    const unknown = c.subscribeRun(RUN);
    assert.equal((await rejection(unknown.all())).code, Code.NotFound);
    // asked again, it throws the same error rather than an empty list
    assert.equal((await rejection(unknown.all())).code, Code.NotFound);
  });
});
