// API keys and TLS against a tiny in-process fake server behind a server interceptor that checks
// `authorization` as frontdesk-server's auth layer does (no live server needed); mutual TLS with
// the certificates of client/testdata/tls.
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import * as http2 from "node:http2";
import type { AddressInfo } from "node:net";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { inspect } from "node:util";
import { afterEach, test } from "node:test";

import { create } from "@bufbuild/protobuf";
import { BinaryWriter, WireType } from "@bufbuild/protobuf/wire";
import { Code, ConnectError, type Interceptor } from "@connectrpc/connect";
import { connectNodeAdapter } from "@connectrpc/connect-node";

import {
  ConversationService,
  FrontdeskClient,
  QUOTA_EXCEEDED,
  RunEventSchema,
  SCOPE_MISSING,
  UNAUTHENTICATED,
  WorkflowService,
  type StreamItem,
  type TlsOptions,
} from "@frontdesk/client";
import { rejection } from "./helpers.js";

const SECRET = "AbCdEfGhIjKlMnOpQrStUvWxYz0123456789-_abcde";
const KEY = `fdk_0123456789abcdef_${SECRET}`;
/** A key whose scopes lack conversation:write. */
const NARROW_KEY = "fdk_fedcba9876543210_narrowNarrowNarrowNarrowNarrowNarrowNarrow12";
/** A key whose tenant is over its request quota. */
const BUSY_KEY = "fdk_00000000000000ff_busyBusyBusyBusyBusyBusyBusyBusyBusyBusyBusy1";
const RUN = "run-1";
const LAST = 4;
// build/test/auth.test.js -> client/testdata/tls
const TLS_DIR = join(dirname(fileURLToPath(import.meta.url)), "..", "..", "..", "testdata", "tls");
const fixture = (name: string): string => readFileSync(join(TLS_DIR, name), "utf8");

function errorInfo(reason: string, metadata: Record<string, string>): Uint8Array {
  const w = new BinaryWriter();
  w.tag(1, WireType.LengthDelimited).string(reason);
  w.tag(2, WireType.LengthDelimited).string("frontdesk.dev");
  for (const [k, v] of Object.entries(metadata)) {
    w.tag(3, WireType.LengthDelimited).fork();
    w.tag(1, WireType.LengthDelimited).string(k).tag(2, WireType.LengthDelimited).string(v);
    w.join();
  }
  return w.finish();
}

function refusal(code: Code, reason: string, metadata: Record<string, string>, delayMs?: number): ConnectError {
  const err = new ConnectError(`refused: ${reason}`, code);
  err.details = [{ type: "google.rpc.ErrorInfo", value: errorInfo(reason, metadata) }];
  if (delayMs !== undefined) {
    const w = new BinaryWriter();
    w.tag(1, WireType.LengthDelimited).fork();
    w.tag(1, WireType.Varint).int64(Math.floor(delayMs / 1000));
    w.tag(2, WireType.Varint).int32((delayMs % 1000) * 1e6);
    w.join();
    err.details.push({ type: "google.rpc.RetryInfo", value: w.finish() });
  }
  return err;
}

interface Gate {
  /** Each call's method and authorization header (undefined: none). */
  seen: [string, string | undefined][];
  startFailures: number;
  breakAfter: number;
}

function event(id: number) {
  return create(RunEventSchema, {
    runId: RUN,
    eventId: BigInt(id),
    time: { seconds: 1_700_000_000n, nanos: id },
    kind: id === LAST ? { case: "runFinished", value: {} } : { case: "nodeStarted", value: { step: id } },
  });
}

/** A fake with the auth layer's refusals: StartConversation fails ABORTED `startFailures`
 * times, SendMessage's first stream breaks after `breakAfter` events (0: never). */
function handler(gate: Gate) {
  let starts = 0;
  let sends = 0;
  const auth: Interceptor = (next) => async (req) => {
    const header = req.header.get("authorization") ?? undefined;
    gate.seen.push([req.method.name, header]);
    if (header === `Bearer ${KEY}`) return next(req);
    if (header === `Bearer ${NARROW_KEY}`) {
      throw refusal(Code.PermissionDenied, SCOPE_MISSING, { scope: "conversation:write" });
    }
    if (header === `Bearer ${BUSY_KEY}`) {
      throw refusal(Code.ResourceExhausted, QUOTA_EXCEEDED, { quota: "requests_per_sec" }, 1500);
    }
    throw refusal(Code.Unauthenticated, UNAUTHENTICATED, {});
  };
  return connectNodeAdapter({
    grpc: true,
    grpcWeb: false,
    connect: false,
    interceptors: [auth],
    routes(router) {
      router.service(ConversationService, {
        startConversation() {
          starts += 1;
          if (starts <= gate.startFailures) throw refusal(Code.Aborted, "THREAD_BUSY", {}, 10);
          return { conversation: { conversationId: "c1" } };
        },
        async *sendMessage() {
          sends += 1;
          for (let i = 1; i <= LAST; i++) {
            if (sends === 1 && gate.breakAfter > 0 && i > gate.breakAfter) {
              throw new ConnectError("broken", Code.Unavailable);
            }
            yield { payload: { case: "event", value: event(i) } };
          }
          yield { payload: { case: "result", value: { runId: RUN } } };
        },
      });
      router.service(WorkflowService, {
        async *subscribeRun(req) {
          for (let i = Number(req.afterEventId) + 1; i <= LAST; i++) yield { event: event(i) };
        },
      });
    },
  });
}

const servers: http2.Http2Server[] = [];

async function serve(tls: boolean): Promise<{ gate: Gate; port: number }> {
  const gate: Gate = { seen: [], startFailures: 0, breakAfter: 0 };
  const server = tls
    ? http2.createSecureServer(
        {
          key: fixture("server.key"),
          cert: fixture("server.pem"),
          ca: fixture("ca.pem"),
          requestCert: true,
          rejectUnauthorized: true,
        },
        handler(gate),
      )
    : http2.createServer(handler(gate));
  servers.push(server);
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  return { gate, port: (server.address() as AddressInfo).port };
}

afterEach(async () => {
  for (const server of servers.splice(0)) {
    await new Promise<void>((resolve) => server.close(() => resolve()));
  }
});

async function collect(stream: AsyncIterable<StreamItem>): Promise<StreamItem[]> {
  const out: StreamItem[] = [];
  for await (const item of stream) out.push(item);
  return out;
}

const FAST = { initialBackoffMs: 10, maxBackoffMs: 20 };

test("the key is sent with every call, retries and re-attaching streams included", async () => {
  const { gate, port } = await serve(false);
  gate.startFailures = 1;
  gate.breakAfter = 2;
  const client = new FrontdeskClient({ baseUrl: `http://127.0.0.1:${port}`, apiKey: KEY, retry: FAST });
  try {
    await client.startConversation({ idempotencyKey: "k1" });
    const items = await collect(client.sendMessage("c1", "hi", { idempotencyKey: "k2" }));
    assert.deepEqual(items.map((i) => i.type), ["event", "event", "event", "event", "result"]);
    const events = await client.subscribeRun(RUN, { afterEventId: 3 }).all();
    assert.deepEqual(events.map((e) => Number(e.eventId)), [4]);
    await client.listWorkflows().catch(() => undefined); // not served: UNIMPLEMENTED, after the gate
  } finally {
    client.close();
  }
  assert.deepEqual(
    gate.seen.map(([method]) => method),
    [
      "StartConversation",
      "StartConversation", // retried after ABORTED
      "SendMessage",
      "SubscribeRun", // re-attached after the stream broke
      "SendMessage", // the call again, for its recorded result
      "SubscribeRun",
      "ListWorkflows",
    ],
  );
  assert.deepEqual(
    gate.seen.map(([, header]) => header),
    Array(7).fill(`Bearer ${KEY}`),
  );
});

test("refusals are decoded and not retried", async () => {
  const { gate, port } = await serve(false);
  const cases: [string | undefined, Code, string][] = [
    [undefined, Code.Unauthenticated, UNAUTHENTICATED],
    [NARROW_KEY, Code.PermissionDenied, SCOPE_MISSING],
    [BUSY_KEY, Code.ResourceExhausted, QUOTA_EXCEEDED],
  ];
  for (const [apiKey, code, reason] of cases) {
    gate.seen = [];
    const client = new FrontdeskClient({ baseUrl: `http://127.0.0.1:${port}`, apiKey, retry: FAST });
    try {
      const unary = await rejection(client.startConversation({ idempotencyKey: "k1" }));
      const streamed = await rejection(collect(client.sendMessage("c1", "hi", { idempotencyKey: "k2" })));
      for (const err of [unary, streamed]) {
        assert.equal(err.code, code);
        assert.equal(err.reason, reason);
        assert.equal(err.retryable, false);
        assert.ok(!err.message.includes(SECRET) && !err.message.includes("busyBusy"), err.message);
      }
      if (reason === SCOPE_MISSING) assert.deepEqual(unary.errorMetadata, { scope: "conversation:write" });
      if (reason === QUOTA_EXCEEDED) {
        assert.deepEqual(unary.errorMetadata, { quota: "requests_per_sec" });
        assert.equal(unary.retryDelayMs, 1500);
        assert.match(unary.message, /retry after 1500ms/);
      }
      assert.deepEqual(
        gate.seen.map(([method]) => method),
        ["StartConversation", "SendMessage"],
      );
    } finally {
      client.close();
    }
  }
});

test("the key is never shown", () => {
  const tls: TlsOptions = { ca: fixture("ca.pem"), cert: fixture("client.pem"), key: fixture("client.key") };
  const client = new FrontdeskClient({
    baseUrl: "https://127.0.0.1:1",
    apiKey: KEY,
    tls,
    headers: { "x-extra": "1" },
  });
  try {
    const texts = [
      inspect(client),
      inspect(client, { showHidden: true, depth: 10 }),
      String(client),
      JSON.stringify({ client }),
    ];
    for (const text of texts) {
      assert.ok(!text.includes(SECRET), text);
      assert.ok(!text.includes("PRIVATE KEY"), text);
      assert.match(text, /apiKey: <redacted>/);
    }
  } finally {
    client.close();
  }
  assert.match(String(new FrontdeskClient({ baseUrl: "http://127.0.0.1:1" })), /apiKey: none/);
  assert.throws(
    () => new FrontdeskClient({ apiKey: `${SECRET}\n${SECRET}` }),
    (e: Error) => e instanceof TypeError && !e.message.includes(SECRET),
  );
  assert.throws(() => new FrontdeskClient({ baseUrl: "http://127.0.0.1:1", tls: {} }), TypeError);
  assert.throws(() => new FrontdeskClient({ baseUrl: "https://127.0.0.1:1", tls: { cert: "x" } }), TypeError);
});

test("mutual TLS", async () => {
  const { gate, port } = await serve(true);
  const full: TlsOptions = {
    ca: fixture("ca.pem"),
    cert: readFileSync(join(TLS_DIR, "client.pem")),
    key: readFileSync(join(TLS_DIR, "client.key")),
  };
  const targets: [string, TlsOptions][] = [
    [`https://localhost:${port}`, full],
    [`https://127.0.0.1:${port}`, { ...full, serverName: "localhost" }],
    [`https://127.0.0.1:${port}`, full],
  ];
  for (const [baseUrl, tls] of targets) {
    const client = new FrontdeskClient({ baseUrl, apiKey: KEY, tls, timeoutMs: 5_000 });
    try {
      const started = await client.startConversation();
      assert.equal(started.conversation?.conversationId, "c1");
    } finally {
      client.close();
    }
  }
  assert.deepEqual(
    gate.seen.map(([, header]) => header),
    Array(3).fill(`Bearer ${KEY}`),
  );

  // The server requires a client certificate; and the client must trust the server's CA.
  for (const tls of [{ ca: fixture("ca.pem") }, {}]) {
    const client = new FrontdeskClient({ baseUrl: `https://localhost:${port}`, apiKey: KEY, tls, timeoutMs: 5_000 });
    try {
      const err = await rejection(client.startConversation());
      assert.ok([Code.Unavailable, Code.Internal, Code.Unknown].includes(err.code), err.message);
    } finally {
      client.close();
    }
  }
  assert.equal(gate.seen.length, 3);
});

// FRONTDESK_TLS_ADDR (host:port, such as localhost:PORT) names a running frontdesk-server serving
// TLS with the certificates of client/testdata/tls and requiring client certificates
// (scripts/sdk-tests.sh starts one); FRONTDESK_KEY, when set, is sent as the key.
const tlsAddr = process.env.FRONTDESK_TLS_ADDR ?? "";
test(
  "live server over mutual TLS",
  { skip: tlsAddr === "" && "FRONTDESK_TLS_ADDR not set: no live TLS frontdesk-server to test against" },
  async () => {
    const apiKey = process.env.FRONTDESK_KEY || undefined;
    const tls: TlsOptions = { ca: fixture("ca.pem"), cert: fixture("client.pem"), key: fixture("client.key") };
    const client = new FrontdeskClient({ baseUrl: `https://${tlsAddr}`, apiKey, tls, timeoutMs: 10_000 });
    try {
      assert.ok((await client.listWorkflows()).some((w) => w.name === "intake"));
      assert.ok((await client.startConversation({ workflow: "intake" })).conversation?.conversationId);
    } finally {
      client.close();
    }
    const withoutCert = new FrontdeskClient({
      baseUrl: `https://${tlsAddr}`,
      apiKey,
      tls: { ca: fixture("ca.pem") },
      timeoutMs: 10_000,
    });
    try {
      await rejection(withoutCert.listWorkflows());
    } finally {
      withoutCert.close();
    }
  },
);
