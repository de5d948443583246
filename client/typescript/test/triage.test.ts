// TriageService against the live server. The scripted demo model answers the triage purposes
// (translator.translate, supervisor.classify, specialist.billing, ticket_matcher.match): every
// ticket is an English billing question that the billing specialist auto-responds to, so it
// is resolved and archived at once.
import assert from "node:assert/strict";
import { after, before } from "node:test";

import {
  Code,
  FrontdeskClient,
  RecommendedAction,
  Role,
  TicketStatus,
  TicketType,
  eventKind,
  type RunEvent,
  type TicketResolution,
  type TriageResult,
} from "@frontdesk/client";
import { addr, baseUrl, liveTest, rejection } from "./helpers.js";

const CUSTOMER = "CUST-001";
const MESSAGE = "I was charged twice for my subscription this month.";

let client: FrontdeskClient;
before(() => {
  if (addr !== "") client = new FrontdeskClient({ baseUrl, timeoutMs: 10_000 });
});
after(() => client?.close());

liveTest("triageTicket streams the resolution, the events, then the result", async () => {
  const stream = client.triageTicket(CUSTOMER, MESSAGE, { subject: "Double charge" });
  const types: string[] = [];
  const events: RunEvent[] = [];
  let resolution: TicketResolution | undefined;
  let result: TriageResult | undefined;
  for await (const item of stream) {
    assert.equal(result, undefined, "nothing may follow the result");
    types.push(item.type);
    if (item.type === "resolution") resolution = item.resolution;
    else if (item.type === "event") events.push(item.event);
    else result = item.result;
  }
  assert.equal(types[0], "resolution");
  assert.equal(types.filter((t) => t === "resolution").length, 1);
  assert.ok(resolution && result);
  assert.equal(stream.resolution, resolution);
  assert.equal(stream.events.length, events.length);

  assert.match(resolution.ticketId, /^TKT-/);
  assert.equal(resolution.matchedExisting, false);

  assert.equal(eventKind(events[0]!), "runStarted");
  assert.equal(eventKind(events.at(-1)!), "runFinished");
  assert.deepEqual(
    events.map((e) => Number(e.eventId)),
    events.map((_, i) => i + 1),
  );
  assert.deepEqual([...new Set(events.map((e) => e.runId))], [result.runId]);
  const started = events.filter((e) => e.kind.case === "nodeStarted").map((e) => e.node);
  for (const node of ["translator", "supervisor", "billing_specialist"]) {
    assert.ok(started.includes(node), `no nodeStarted for ${node}: ${started.join(",")}`);
  }
  assert.ok(started.indexOf("translator") < started.indexOf("supervisor"));
  assert.ok(started.indexOf("supervisor") < started.indexOf("billing_specialist"));
  const tools = events.flatMap((e) => (e.kind.case === "toolCalled" ? [e.kind.value.name] : []));
  assert.ok(tools.includes("customer_lookup"), `tools called: ${tools.join(",")}`);

  assert.equal(result.ticketId, resolution.ticketId);
  assert.equal(result.customerId, CUSTOMER);
  assert.equal(result.ticketType, TicketType.BILLING);
  assert.equal(result.recommendedAction, RecommendedAction.AUTO_RESPOND);
  assert.equal(result.status, TicketStatus.RESOLVED);
  assert.ok(result.suggestedResponse);
  assert.equal(result.language, "en");
  assert.equal(result.replayed, false);
});

liveTest("getTicket, listTickets and listActiveTickets", async () => {
  const result = await client.triageTicket(CUSTOMER, MESSAGE, { subject: "Charged twice" }).result();
  const ticketId = result.ticketId;

  const got = await client.getTicket(CUSTOMER, ticketId);
  assert.equal(got.ticket?.ticketId, ticketId);
  assert.equal(got.ticket?.customerId, CUSTOMER);
  assert.equal(got.ticket?.subject, "Charged twice");
  assert.equal(got.ticket?.status, TicketStatus.RESOLVED);
  assert.deepEqual(
    got.messages.map((m) => m.role),
    [Role.USER, Role.ASSISTANT],
  );
  assert.equal(got.messages[0]?.text, MESSAGE);
  assert.equal(got.messages[1]?.text, result.suggestedResponse);
  assert.equal(got.result?.recommendedAction, RecommendedAction.AUTO_RESPOND);

  // other tests may add tickets meanwhile: look for this one
  const ids = async (status?: "resolved" | "escalated" | "active") =>
    (await client.listTickets(CUSTOMER, { status, pageSize: 50 })).tickets.map((t) => t.ticketId);
  assert.ok((await ids()).includes(ticketId));
  assert.ok((await ids("resolved")).includes(ticketId));
  assert.ok(!(await ids("escalated")).includes(ticketId));
  assert.deepEqual(await ids("active"), []);
  let found = false;
  for await (const t of client.allTickets(CUSTOMER, { pageSize: 1 })) {
    if (t.ticketId === ticketId) {
      found = true;
      break;
    }
  }
  assert.ok(found);
  // resolved at once: nothing stays active
  assert.deepEqual(await client.listActiveTickets(CUSTOMER), []);
  await assert.rejects(client.listTickets(CUSTOMER, { status: "open" as never }), TypeError);
});

liveTest("listTickets pages", async () => {
  const customer = "CUST-002";
  for (let i = 0; i < 2; i++) await client.triageTicket(customer, MESSAGE).result();
  const page = await client.listTickets(customer, { pageSize: 1 });
  assert.equal(page.tickets.length, 1);
  assert.ok(page.nextPageToken);
  const page2 = await client.listTickets(customer, { pageSize: 1, pageToken: page.nextPageToken });
  assert.equal(page2.tickets.length, 1);
  assert.notEqual(page2.tickets[0]?.ticketId, page.tickets[0]?.ticketId);
});

liveTest("an idempotency key replays the triage", async () => {
  const key = crypto.randomUUID();
  const first = await client.triageTicket(CUSTOMER, MESSAGE, { idempotencyKey: key }).result();
  const stream = client.triageTicket(CUSTOMER, MESSAGE, { idempotencyKey: key });
  const again = await stream.result();
  assert.equal(again.replayed, true);
  assert.equal(again.ticketId, first.ticketId);
  assert.equal(stream.resolution?.ticketId, first.ticketId);
});

liveTest("an unknown customer is NOT_FOUND", async () => {
  const err = await rejection(client.triageTicket("CUST-999", MESSAGE).result());
  assert.equal(err.code, Code.NotFound);
  assert.equal(err.reason, "NOT_FOUND");
});

liveTest("another customer's ticket is NOT_FOUND", async () => {
  const { ticketId } = await client.triageTicket(CUSTOMER, MESSAGE).result();
  const err = await rejection(client.getTicket("CUST-002", ticketId));
  assert.equal(err.code, Code.NotFound);
  assert.equal(err.reason, "NOT_FOUND");
});

liveTest("an empty message is INVALID_ARGUMENT", async () => {
  const err = await rejection(client.triageTicket(CUSTOMER, "").result());
  assert.equal(err.code, Code.InvalidArgument);
  assert.deepEqual(
    err.fieldViolations.map((v) => v.field),
    ["message"],
  );
});

liveTest("an AbortSignal cancels the triage stream", async () => {
  const ac = new AbortController();
  // another customer: the run finishes server-side, CUSTOMER's active tickets stay untouched
  const stream = client.triageTicket("CUST-003", MESSAGE, { signal: ac.signal });
  const err = await rejection(
    (async () => {
      for await (const item of stream) {
        assert.notEqual(item.type, "result", "the result arrived after the abort");
        ac.abort();
      }
    })(),
  );
  assert.equal(err.code, Code.Canceled);
  // nothing is delivered after the abort, even what had already arrived: only the first item
  assert.equal(stream.events.length + (stream.resolution === undefined ? 0 : 1), 1);
});
