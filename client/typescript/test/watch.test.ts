// watchInvestigation watching again after UNAVAILABLE, against an in-process fake
// InvestigationService whose watches end as each test scripts them.
import assert from "node:assert/strict";
import * as http2 from "node:http2";
import type { AddressInfo } from "node:net";
import { afterEach, beforeEach, test } from "node:test";

import { create } from "@bufbuild/protobuf";
import { Code, ConnectError } from "@connectrpc/connect";
import { connectNodeAdapter } from "@connectrpc/connect-node";

import {
  AuditEntrySchema,
  FrontdeskClient,
  FrontdeskError,
  InvestigationService,
  InvestigationStatus,
  StatusChangeSchema,
  type RetryPolicy,
} from "@frontdesk/client";
import { failure } from "./helpers.js";

/** The fake's trail: seqs 1..LAST, the last the advisory report's status change. */
const LAST = 5;

interface Script {
  /** The first `cuts` watches end after `cutAfter` entries (counted from afterSeq) with `cut()`. */
  cuts: number;
  cutAfter: number;
  cut: () => ConnectError;
  /** Every watch ends with `cut()` before it sends this seq (0: never), as a server that keeps failing. */
  stuckAt: number;
  /** Every watch after the first starts `overlap` entries at or below its afterSeq. */
  overlap: number;
  asked: number[];
  called: number[];
}

let script: Script;
let server: http2.Http2Server;
let baseUrl = "";

beforeEach(async () => {
  script = {
    cuts: 1,
    cutAfter: 2,
    cut: () => failure(Code.Unavailable, "SHUTTING_DOWN", 200),
    stuckAt: 0,
    overlap: 0,
    asked: [],
    called: [],
  };
  const handler = connectNodeAdapter({
    grpc: true,
    grpcWeb: false,
    connect: false,
    routes(router) {
      router.service(InvestigationService, {
        async *watchInvestigation(req) {
          script.asked.push(req.afterSeq);
          script.called.push(performance.now());
          const n = script.asked.length;
          const from = req.afterSeq + 1 - (n > 1 ? Math.min(script.overlap, req.afterSeq) : 0);
          let sent = 0;
          for (let seq = from; seq <= LAST; seq++) {
            if ((n <= script.cuts && sent === script.cutAfter) || (script.stuckAt > 0 && seq >= script.stuckAt)) {
              throw script.cut();
            }
            const entry = create(AuditEntrySchema, { investigationId: "INV-1", seq });
            if (seq === LAST) {
              entry.entry = {
                case: "statusChange",
                value: create(StatusChangeSchema, { to: InvestigationStatus.ADVISORY_REPORT_GENERATED }),
              };
            }
            yield { entry };
            sent++;
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

/** The seqs a watch yielded, and the error that ended it. */
async function watch(
  retry: RetryPolicy | boolean = FAST,
  afterSeq = 0,
): Promise<{ seqs: number[]; err: FrontdeskError | undefined }> {
  const client = new FrontdeskClient({ baseUrl, retry });
  const seqs: number[] = [];
  try {
    for await (const entry of client.watchInvestigation("INV-1", { afterSeq, timeoutMs: 10_000 })) {
      seqs.push(entry.seq);
    }
    return { seqs, err: undefined };
  } catch (e) {
    assert.ok(e instanceof FrontdeskError, `expected FrontdeskError, got ${String(e)}`);
    return { seqs, err: e };
  } finally {
    client.close();
  }
}

test("a watch cut with UNAVAILABLE SHUTTING_DOWN resumes from the last seq, after the RetryInfo delay", async () => {
  const started = performance.now();
  const { seqs, err } = await watch();
  assert.equal(err, undefined);
  assert.deepEqual(seqs, [1, 2, 3, 4, 5]);
  assert.deepEqual(script.asked, [0, 2]);
  // the RetryInfo delay (200ms), not the policy's 10-20ms backoff, and no more
  assert.ok(script.called[1]! - script.called[0]! >= 190, `${script.called[1]! - script.called[0]!}ms`);
  assert.ok(performance.now() - started < 2000);
});

test("a resumed watch yields no entry twice when the server repeats one", async () => {
  script.cut = () => failure(Code.Unavailable, "SHUTTING_DOWN", 10);
  script.overlap = 2;
  const { seqs, err } = await watch();
  assert.equal(err, undefined);
  assert.deepEqual(seqs, [1, 2, 3, 4, 5]);
});

test("a watch cut before any entry resumes from the afterSeq given", async () => {
  script.cutAfter = 0;
  const { seqs, err } = await watch(FAST, 3);
  assert.equal(err, undefined);
  assert.deepEqual(seqs, [4, 5]);
  assert.deepEqual(script.asked, [3, 3]);
});

test("a watch cut by a broken connection (no RetryInfo) resumes after the policy's backoff", async () => {
  script.cuts = 2;
  script.cutAfter = 1;
  script.cut = () => new ConnectError("connection reset", Code.Unavailable);
  const started = performance.now();
  const { seqs, err } = await watch();
  assert.equal(err, undefined);
  assert.deepEqual(seqs, [1, 2, 3, 4, 5]);
  assert.deepEqual(script.asked, [0, 1, 2]);
  assert.ok(performance.now() - started < 500);
});

test("with retries off a watch cut with SHUTTING_DOWN throws it", async () => {
  // the same cut resumes under the policy ...
  let r = await watch();
  assert.equal(r.err, undefined);
  assert.deepEqual(r.seqs, [1, 2, 3, 4, 5]);
  assert.equal(script.asked.length, 2);
  // ... and is thrown with it off
  script.asked = [];
  r = await watch(false);
  assert.equal(r.err?.code, Code.Unavailable);
  assert.equal(r.err?.reason, "SHUTTING_DOWN");
  assert.deepEqual(r.seqs, [1, 2]);
  assert.equal(script.asked.length, 1);
});

test("a watch throws errors other than UNAVAILABLE, ABORTED included", async () => {
  script.cut = () => failure(Code.Unavailable, "SCRIPTED", 10);
  let r = await watch();
  assert.equal(r.err, undefined);
  assert.deepEqual(r.seqs, [1, 2, 3, 4, 5]);
  for (const code of [Code.Internal, Code.Aborted, Code.NotFound]) {
    script.asked = [];
    script.cut = () => failure(code, "SCRIPTED", 10);
    r = await watch();
    assert.equal(r.err?.code, code);
    assert.deepEqual(r.seqs, [1, 2]);
    assert.equal(script.asked.length, 1);
  }
});

test("a watch's attempts start afresh after each entry: it outlives many restarts", async () => {
  // four cuts, each after one new entry, under two attempts
  script.cuts = 4;
  script.cutAfter = 1;
  script.cut = () => failure(Code.Unavailable, "SHUTTING_DOWN", 10);
  const { seqs, err } = await watch({ maxAttempts: 2 });
  assert.equal(err, undefined);
  assert.deepEqual(seqs, [1, 2, 3, 4, 5]);
  assert.deepEqual(script.asked, [0, 1, 2, 3, 4]);
});

test("a watch's waiting starts afresh after each entry", async () => {
  // four 100ms waits, each after a new entry, under 150ms of waiting
  script.cuts = 4;
  script.cutAfter = 1;
  script.cut = () => failure(Code.Unavailable, "SHUTTING_DOWN", 100);
  const { seqs, err } = await watch({ maxWaitMs: 150 });
  assert.equal(err, undefined);
  assert.deepEqual(seqs, [1, 2, 3, 4, 5]);
  assert.equal(script.asked.length, 5);
});

test("a watch resumes at most maxAttempts times in a row, with no entry between", async () => {
  script.cuts = 2;
  script.cutAfter = 1;
  script.stuckAt = 4;
  script.cut = () => failure(Code.Unavailable, "SHUTTING_DOWN", 10);
  const { seqs, err } = await watch({ maxAttempts: 3 });
  assert.equal(err?.code, Code.Unavailable);
  assert.deepEqual(seqs, [1, 2, 3]);
  // counted from the last entry (3): three watches after it, the first included
  assert.deepEqual(script.asked, [0, 1, 2, 3, 3]);
});

test("a watch resumes within maxWaitMs in a row", async () => {
  script.cuts = 1;
  script.cutAfter = 1;
  script.stuckAt = 3;
  // one 200ms wait after each entry fits in 300ms, two in a row do not
  const { seqs, err } = await watch({ maxWaitMs: 300 });
  assert.equal(err?.reason, "SHUTTING_DOWN");
  assert.deepEqual(seqs, [1, 2]);
  assert.deepEqual(script.asked, [0, 1, 2]);
});

test("aborting the signal stops the wait before watching again", async () => {
  script.cut = () => failure(Code.Unavailable, "SHUTTING_DOWN", 5_000);
  const client = new FrontdeskClient({ baseUrl, retry: FAST });
  const abort = new AbortController();
  const seqs: number[] = [];
  const started = performance.now();
  try {
    const stream = client.watchInvestigation("INV-1", { signal: abort.signal });
    setTimeout(() => abort.abort(), 200);
    await assert.rejects(
      (async () => {
        for await (const entry of stream) seqs.push(entry.seq);
      })(),
      (e: unknown) => e instanceof FrontdeskError && e.code === Code.Canceled,
    );
  } finally {
    client.close();
  }
  assert.deepEqual(seqs, [1, 2]);
  assert.ok(performance.now() - started < 2000);
  assert.equal(script.asked.length, 1);
});
