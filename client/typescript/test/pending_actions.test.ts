// ListPendingActions paging against an in-process fake InvestigationService (no live
// frontdesk-server needed): the fake serves a fixed list of actions in pages and records each
// request it receives.
import assert from "node:assert/strict";
import * as http2 from "node:http2";
import type { AddressInfo } from "node:net";
import { afterEach, test } from "node:test";

import { create } from "@bufbuild/protobuf";
import { Code, ConnectError } from "@connectrpc/connect";
import { connectNodeAdapter } from "@connectrpc/connect-node";

import {
  FrontdeskClient,
  InvestigationService,
  PendingActionSchema,
  PendingActionStatus,
  type PendingAction,
} from "@frontdesk/client";
import { rejection } from "./helpers.js";

/** What the fake received: recipient, status, page size and token of each request. */
type Sent = [string, PendingActionStatus, number, string];

interface Fake {
  actions: PendingAction[];
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
 * Serves `count` actions in pages: a page holds pageSize actions (0 means 20) from the offset
 * its token names ("after-<n>"); another token is INVALID_ARGUMENT, as the server answers.
 */
async function serve(count: number): Promise<Fake> {
  const fake: Fake = {
    actions: Array.from({ length: count }, (_, i) =>
      create(PendingActionSchema, {
        actionId: `INV-${i + 1}-changer`,
        investigationId: `INV-${i + 1}`,
        recipientId: "u003",
      }),
    ),
    forgeNext: false,
    sent: [],
    baseUrl: "",
  };
  const handler = connectNodeAdapter({
    grpc: true,
    grpcWeb: false,
    connect: false,
    routes(router) {
      router.service(InvestigationService, {
        listPendingActions(req) {
          fake.sent.push([req.recipientId, req.status, req.pageSize, req.pageToken]);
          let start = 0;
          if (req.pageToken !== "") {
            const m = /^after-(\d+)$/.exec(req.pageToken);
            const n = m ? Number(m[1]) : NaN;
            if (!(n > 0 && n <= fake.actions.length)) {
              throw new ConnectError("page_token: not a token", Code.InvalidArgument);
            }
            start = n;
          }
          const end = Math.min(start + (req.pageSize || 20), fake.actions.length);
          const more = end < fake.actions.length;
          return {
            actions: fake.actions.slice(start, end),
            nextPageToken: more ? (fake.forgeNext ? "forged" : `after-${end}`) : "",
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

const ids = (actions: readonly PendingAction[]) => actions.map((a) => a.actionId);
const ALL = ["INV-1-changer", "INV-2-changer", "INV-3-changer", "INV-4-changer", "INV-5-changer"];
const { ANSWERED, UNSPECIFIED } = PendingActionStatus;

test("listPendingActions sends pageSize and pageToken and returns nextPageToken", async () => {
  const fake = await serve(5);
  const [page, last, everything] = await withClient(fake, async (c) => {
    const page = await c.listPendingActions({ recipientId: "u003", status: "answered", pageSize: 2 });
    const last = await c.listPendingActions({
      recipientId: "u003",
      status: "answered",
      pageSize: 3,
      pageToken: page.nextPageToken,
    });
    return [page, last, await c.listPendingActions()] as const;
  });
  assert.deepEqual(ids(page.actions), ALL.slice(0, 2));
  assert.equal(page.nextPageToken, "after-2");
  assert.deepEqual(ids(last.actions), ALL.slice(2));
  assert.equal(last.nextPageToken, "");
  assert.deepEqual(ids(everything.actions), ALL);
  assert.deepEqual(fake.sent, [
    ["u003", ANSWERED, 2, ""],
    ["u003", ANSWERED, 3, "after-2"],
    ["", UNSPECIFIED, 0, ""], // omitted: everyone's, the server's page size
  ]);
});

test("a refused pageToken rejects with INVALID_ARGUMENT", async () => {
  const fake = await serve(5);
  const err = await withClient(fake, (c) => rejection(c.listPendingActions({ pageToken: "forged" })));
  assert.equal(err.code, Code.InvalidArgument);
});

test("allPendingActions follows nextPageToken to the last page", async () => {
  const fake = await serve(5);
  const got = await withClient(fake, async (c) => {
    const out: string[] = [];
    for await (const a of c.allPendingActions({ recipientId: "u003", status: ANSWERED, pageSize: 2 })) {
      out.push(a.actionId);
    }
    return out;
  });
  assert.deepEqual(got, ALL);
  assert.deepEqual(fake.sent, [
    ["u003", ANSWERED, 2, ""],
    ["u003", ANSWERED, 2, "after-2"],
    ["u003", ANSWERED, 2, "after-4"],
  ]);
});

test("allPendingActions fetches no page after the loop stops", async () => {
  const fake = await serve(5);
  const got = await withClient(fake, async (c) => {
    const out: string[] = [];
    for await (const a of c.allPendingActions({ pageSize: 2 })) {
      out.push(a.actionId);
      if (out.length === 3) break;
    }
    return out;
  });
  assert.deepEqual(got, ALL.slice(0, 3));
  assert.deepEqual(fake.sent, [
    ["", UNSPECIFIED, 2, ""],
    ["", UNSPECIFIED, 2, "after-2"],
  ]);
});

test("allPendingActions throws a failure after the pages before it", async () => {
  const fake = await serve(5);
  fake.forgeNext = true;
  const got: string[] = [];
  const err = await withClient(fake, (c) =>
    rejection(
      (async () => {
        for await (const a of c.allPendingActions({ recipientId: "u003", pageSize: 2 })) got.push(a.actionId);
      })(),
    ),
  );
  assert.deepEqual(got, ALL.slice(0, 2));
  assert.equal(err.code, Code.InvalidArgument);
  assert.deepEqual(
    fake.sent.map((s) => s[3]),
    ["", "forged"],
  );
});

test("allPendingActions of an empty list is one call", async () => {
  const fake = await serve(0);
  const got = await withClient(fake, async (c) => {
    const out: PendingAction[] = [];
    for await (const a of c.allPendingActions({ recipientId: "u009", status: "answered" })) out.push(a);
    return out;
  });
  assert.deepEqual(got, []);
  assert.deepEqual(fake.sent, [["u009", ANSWERED, 0, ""]]);
});
