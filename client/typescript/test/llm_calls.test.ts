// ListLlmCalls paging against an in-process fake WorkflowService, for what a live turn's two
// calls cannot show (many pages, the requests as sent); client.test.ts checks the wrappers
// against the server of scripts/sdk-tests.sh, which records calls. The fake serves one
// thread's calls, the most recent first, in pages and records each request it receives.
import assert from "node:assert/strict";
import * as http2 from "node:http2";
import type { AddressInfo } from "node:net";
import { afterEach, test } from "node:test";

import { create } from "@bufbuild/protobuf";
import { Code, ConnectError } from "@connectrpc/connect";
import { connectNodeAdapter } from "@connectrpc/connect-node";

import { FrontdeskClient, LlmCallSchema, WorkflowService, type LlmCall } from "@frontdesk/client";
import { rejection } from "./helpers.js";

const THREAD = "conv-llm";

/** What the fake received: thread, page size and token of each request. */
type Sent = [string, number, string];

interface Fake {
  /** The most recent first. */
  calls: LlmCall[];
  /** When > 0, a page holds at most this many calls whatever its size. */
  cutAt: number;
  /** The next page token handed out is "forged", which the fake then refuses. */
  forgeNext: boolean;
  sent: Sent[];
  baseUrl: string;
}

let server: http2.Http2Server | undefined;

afterEach(async () => {
  const s = server;
  server = undefined;
  if (s) await new Promise<void>((resolve) => s.close(() => resolve()));
});

/**
 * Serves `count` calls of THREAD in pages: a page holds pageSize calls (0 means 50) from the
 * offset its token names ("<thread>/after-<n>"), or at most cutAt (as the server ends a page at
 * about 3 MiB of prompts and replies). A token that does not decode is INVALID_ARGUMENT and
 * another thread NOT_FOUND, as the server answers.
 */
async function serve(count: number): Promise<Fake> {
  const fake: Fake = {
    // Numbered down so that call-1 is the oldest: the server lists the most recent first.
    calls: Array.from({ length: count }, (_, i) =>
      create(LlmCallSchema, {
        runId: `run-${count - i}`,
        node: "chat_agent",
        purpose: `call-${count - i}`,
        model: "scripted",
        promptTokens: BigInt(10 * (count - i)),
        completionTokens: BigInt(count - i),
      }),
    ),
    cutAt: 0,
    forgeNext: false,
    sent: [],
    baseUrl: "",
  };
  const handler = connectNodeAdapter({
    grpc: true,
    grpcWeb: false,
    connect: false,
    routes(router) {
      router.service(WorkflowService, {
        listLlmCalls(req) {
          fake.sent.push([req.threadId, req.pageSize, req.pageToken]);
          if (req.threadId !== THREAD) {
            throw new ConnectError(`thread ${req.threadId} not found`, Code.NotFound);
          }
          let start = 0;
          if (req.pageToken !== "") {
            const m = /^conv-llm\/after-(\d+)$/.exec(req.pageToken);
            const n = m ? Number(m[1]) : NaN;
            if (!(n > 0 && n <= fake.calls.length)) {
              throw new ConnectError("page_token: not a token", Code.InvalidArgument);
            }
            start = n;
          }
          let size = req.pageSize || 50;
          if (fake.cutAt > 0) size = Math.min(size, fake.cutAt);
          const end = Math.min(start + size, fake.calls.length);
          const more = end < fake.calls.length;
          return {
            calls: fake.calls.slice(start, end),
            totalCalls: BigInt(fake.calls.length),
            totalUsage: {
              promptTokens: fake.calls.reduce((sum, c) => sum + c.promptTokens, 0n),
              completionTokens: fake.calls.reduce((sum, c) => sum + c.completionTokens, 0n),
            },
            nextPageToken: more ? (fake.forgeNext ? "forged" : `${THREAD}/after-${end}`) : "",
          };
        },
      });
    },
  });
  const s = http2.createServer(handler);
  server = s;
  await new Promise<void>((resolve) => s.listen(0, "127.0.0.1", resolve));
  fake.baseUrl = `http://127.0.0.1:${(s.address() as AddressInfo).port}`;
  return fake;
}

async function withClient<T>(fake: Fake, fn: (c: FrontdeskClient) => Promise<T>): Promise<T> {
  const client = new FrontdeskClient({ baseUrl: fake.baseUrl, retry: false, timeoutMs: 10_000 });
  try {
    return await fn(client);
  } finally {
    client.close();
  }
}

async function collect(it: AsyncIterable<LlmCall>, stopAfter = Infinity): Promise<string[]> {
  const out: string[] = [];
  for await (const c of it) {
    out.push(c.purpose);
    if (out.length === stopAfter) break;
  }
  return out;
}

const purposes = (calls: readonly LlmCall[]) => calls.map((c) => c.purpose);
const ALL = ["call-5", "call-4", "call-3", "call-2", "call-1"];

test("listLlmCalls sends the thread, pageSize and pageToken and returns the totals", async () => {
  const fake = await serve(5);
  const [page, last, everything] = await withClient(fake, async (c) => {
    const page = await c.listLlmCalls({ threadId: THREAD, pageSize: 2 });
    const last = await c.listLlmCalls({ threadId: THREAD, pageSize: 3, pageToken: page.nextPageToken });
    return [page, last, await c.listLlmCalls({ threadId: THREAD })] as const;
  });
  assert.deepEqual(purposes(page.calls), ALL.slice(0, 2));
  assert.equal(page.nextPageToken, `${THREAD}/after-2`);
  // The totals cover the whole thread, not the page.
  assert.equal(page.totalCalls, 5n);
  assert.equal(page.totalUsage?.promptTokens, 150n);
  assert.equal(page.totalUsage?.completionTokens, 15n);
  assert.deepEqual(purposes(last.calls), ALL.slice(2));
  assert.equal(last.nextPageToken, "");
  assert.deepEqual(purposes(everything.calls), ALL);
  assert.deepEqual(fake.sent, [
    [THREAD, 2, ""],
    [THREAD, 3, `${THREAD}/after-2`],
    [THREAD, 0, ""], // omitted: the server's page size
  ]);
});

test("a refused pageToken is INVALID_ARGUMENT and an unknown thread NOT_FOUND", async () => {
  const fake = await serve(5);
  const [refused, unknown] = await withClient(fake, async (c) => [
    await rejection(c.listLlmCalls({ threadId: THREAD, pageToken: "forged" })),
    await rejection(c.listLlmCalls({ threadId: "conv-unknown" })),
  ]);
  assert.equal(refused.code, Code.InvalidArgument);
  assert.equal(unknown.code, Code.NotFound);
});

test("allLlmCalls follows nextPageToken to the last page", async () => {
  const fake = await serve(5);
  const got = await withClient(fake, (c) => collect(c.allLlmCalls({ threadId: THREAD, pageSize: 2 })));
  assert.deepEqual(got, ALL);
  assert.deepEqual(fake.sent, [
    [THREAD, 2, ""],
    [THREAD, 2, `${THREAD}/after-2`],
    [THREAD, 2, `${THREAD}/after-4`],
  ]);
});

test("allLlmCalls reads on past a page the server ended early", async () => {
  // A short page still has a token: the helper goes on by the token, not by the page's length.
  const fake = await serve(5);
  fake.cutAt = 2;
  const got = await withClient(fake, (c) => collect(c.allLlmCalls({ threadId: THREAD })));
  assert.deepEqual(got, ALL);
  assert.deepEqual(
    fake.sent.map((s) => s[2]),
    ["", `${THREAD}/after-2`, `${THREAD}/after-4`],
  );
});

test("allLlmCalls fetches no page after the loop stops", async () => {
  const fake = await serve(5);
  const got = await withClient(fake, (c) => collect(c.allLlmCalls({ threadId: THREAD, pageSize: 2 }), 3));
  assert.deepEqual(got, ALL.slice(0, 3));
  assert.deepEqual(fake.sent, [
    [THREAD, 2, ""],
    [THREAD, 2, `${THREAD}/after-2`],
  ]);
});

test("allLlmCalls throws a failure after the pages before it", async () => {
  const fake = await serve(5);
  fake.forgeNext = true;
  const got: string[] = [];
  const err = await withClient(fake, (c) =>
    rejection(
      (async () => {
        for await (const call of c.allLlmCalls({ threadId: THREAD, pageSize: 2 })) got.push(call.purpose);
      })(),
    ),
  );
  assert.deepEqual(got, ALL.slice(0, 2));
  assert.equal(err.code, Code.InvalidArgument);
  assert.deepEqual(
    fake.sent.map((s) => s[2]),
    ["", "forged"],
  );
});

test("allLlmCalls of a thread without calls is one call", async () => {
  const fake = await serve(0);
  const got = await withClient(fake, (c) => collect(c.allLlmCalls({ threadId: THREAD })));
  assert.deepEqual(got, []);
  assert.deepEqual(fake.sent, [[THREAD, 0, ""]]);
});
