// InvestigationService against the live server. The scripted demo model answers every
// investigation purpose with a standing reply (tests/fixtures/demo-script.json); the changer's
// claim it extracts is always "I covered for u006, on vacation", which holds for a change made
// on 2025-11-10. The server is shared with the other SDK suites and an investigation exists
// once per mutation, so every test investigates inline mutations with fresh ids.
import assert from "node:assert/strict";
import { after, before } from "node:test";

import {
  Code,
  FrontdeskClient,
  InvestigationStatus as S,
  ManagerDecision,
  PendingActionStatus,
  Recommendation,
  ResponderRole,
  AgentAction,
  eventKind,
  type HrMutationInput,
  type Investigation,
} from "@frontdesk/client";
import { addr, baseUrl, liveTest, rejection } from "./helpers.js";

let client: FrontdeskClient;
before(() => {
  if (addr !== "") client = new FrontdeskClient({ baseUrl, timeoutMs: 10_000 });
});
after(() => client?.close());

const freshId = () => `ts-${crypto.randomUUID().replaceAll("-", "").slice(0, 12)}`;

/** Mutation 1002's change, with a fresh id: u003 is not authorised for Payroll at Admin. */
const unauthorised = (): HrMutationInput => ({
  mutationId: freshId(),
  changerId: "u003",
  targetUserId: "u007",
  system: "Payroll",
  accessLevel: "Admin",
  changeType: "salary_change",
  description: "Raised monthly salary by 4%",
  changedAt: new Date("2025-11-10T14:30:00Z"),
});

/** Mutation 1001's change, with a fresh id: u002's role allows HRPortal at Write. */
const authorised = (): HrMutationInput => ({
  mutationId: freshId(),
  changerId: "u002",
  targetUserId: "u003",
  system: "HRPortal",
  accessLevel: "Write",
  changeType: "address_change",
  description: "Updated home address",
  changedAt: new Date("2025-11-10T09:00:00Z"),
});

const statuses = (inv: Investigation) => inv.statusHistory.map((c) => c.to);

/** The ids of every pending action (all pages) of the recipient with the status. */
async function pendingIds(recipientId: string, status?: "awaiting" | "answered"): Promise<string[]> {
  const ids: string[] = [];
  for await (const a of client.allPendingActions({ recipientId, status, pageSize: 100 })) ids.push(a.actionId);
  return ids;
}

liveTest("an authorised change finishes at once with ACCEPT", async () => {
  const mutation = authorised();
  const stream = client.startInvestigation(mutation);
  const types: string[] = [];
  let last: Investigation | undefined;
  for await (const item of stream) {
    assert.equal(last, undefined, "nothing may follow the investigation");
    types.push(item.type);
    if (item.type === "investigation") last = item.investigation;
  }
  assert.ok(last);
  assert.equal(types.at(-1), "investigation");
  assert.equal(await stream.result(), last);
  assert.equal(eventKind(stream.events[0]!), "runStarted");
  assert.equal(eventKind(stream.events.at(-1)!), "runFinished");
  assert.deepEqual(
    stream.messages.map((m) => m.action),
    [
      AgentAction.CHECK_RIGHTS,
      AgentAction.CHECK_RIGHTS_RESULT,
      AgentAction.GENERATE_ADVISORY_REPORT,
      AgentAction.ADVISORY_REPORT_RESULT,
    ],
  );
  assert.deepEqual(
    stream.statusChanges.map((c) => c.to),
    statuses(last),
  );

  assert.equal(last.investigationId, `INV-${mutation.mutationId}`);
  assert.equal(last.mutation?.mutationId, mutation.mutationId);
  assert.equal(last.mutation?.changedAt?.seconds, 1_762_765_200n);
  assert.equal(last.finished, true);
  assert.equal(last.status, S.ADVISORY_REPORT_GENERATED);
  assert.deepEqual(statuses(last), [S.INVESTIGATION_STARTED, S.APPROVED, S.ADVISORY_REPORT_GENERATED]);
  assert.equal(last.rightsCheck?.authorized, true);
  assert.equal(last.report?.recommendation, Recommendation.ACCEPT);
  assert.ok(last.report?.summary);
  assert.deepEqual(last.awaiting, []);

  const got = await client.getInvestigation(last.investigationId);
  assert.equal(got.status, S.ADVISORY_REPORT_GENERATED);
  assert.equal(got.report?.reportId, last.report?.reportId);

  // one investigation per mutation
  const again = await rejection(client.startInvestigation(mutation).result());
  assert.equal(again.code, Code.AlreadyExists);
});

liveTest("the changer and then the manager answer, and the audit trail tells it all", async () => {
  const first = await client.startInvestigation(unauthorised()).result();
  const id = first.investigationId;
  assert.equal(first.status, S.AWAITING_USER_RESPONSE);
  assert.equal(first.finished, false);
  assert.equal(first.rightsCheck?.authorized, false);
  assert.equal(first.awaiting.length, 1);
  const action = first.awaiting[0]!;
  assert.equal(action.actionId, `${id}-changer`);
  assert.equal(action.recipientId, "u003");
  assert.equal(action.recipientRole, ResponderRole.CHANGER);
  assert.equal(action.status, PendingActionStatus.AWAITING);
  // other suites' investigations may wait for u003 too: look for this one
  assert.ok((await pendingIds("u003")).includes(action.actionId));
  let waiting = false;
  for await (const inv of client.allInvestigations({ status: "AWAITING_USER_RESPONSE", pageSize: 100 })) {
    if (inv.investigationId === id) waiting = true;
  }
  assert.ok(waiting, "listed as awaiting the user's response");

  const second = await client
    .respond({
      investigationId: id,
      actionId: action.actionId,
      role: "changer",
      responderId: "u003",
      text: "I stood in for Frank (u006), who was on vacation.",
    })
    .result();
  assert.equal(second.status, S.AWAITING_MANAGER_RESPONSE);
  assert.equal(second.claim?.valid, true);
  assert.equal(second.claim?.coveredUserId, "u006");
  const manager = second.awaiting[0]!;
  assert.equal(manager.actionId, `${id}-manager`);
  assert.equal(manager.recipientId, "u001");
  assert.equal(manager.recipientRole, ResponderRole.MANAGER);
  assert.ok(!(await pendingIds("u003")).includes(action.actionId));
  assert.ok((await pendingIds("u003", "answered")).includes(action.actionId));

  const third = await client
    .respond({
      investigationId: id,
      actionId: manager.actionId,
      role: "manager",
      responderId: "u001",
      text: "Confirmed with the team.",
      decision: "approve",
    })
    .result();
  assert.equal(third.finished, true);
  assert.deepEqual(statuses(third), [
    S.INVESTIGATION_STARTED,
    S.CLARIFICATION_REQUESTED,
    S.AWAITING_USER_RESPONSE,
    S.MANAGER_VERIFICATION_REQUESTED,
    S.AWAITING_MANAGER_RESPONSE,
    S.APPROVED,
    S.ADVISORY_REPORT_GENERATED,
  ]);
  assert.equal(third.manager?.decision, ManagerDecision.APPROVE);
  assert.equal(third.report?.recommendation, Recommendation.ACCEPT);

  const twice = await rejection(
    client
      .respond({ investigationId: id, actionId: manager.actionId, role: "manager", responderId: "u001", decision: "deny" })
      .result(),
  );
  assert.equal(twice.code, Code.FailedPrecondition);
  assert.equal(twice.reason, "INTERRUPT_ANSWERED");

  const trail = await client.getAuditTrail(id);
  assert.deepEqual(
    trail.map((e) => e.seq),
    trail.map((_, i) => i + 1),
  );
  assert.deepEqual(
    trail.flatMap((e) => (e.entry.case === "statusChange" ? [e.entry.value.to] : [])),
    statuses(third),
  );
  const replies = trail.flatMap((e) => (e.entry.case === "reply" ? [e] : []));
  assert.deepEqual(
    replies.map((e) => (e.entry.case === "reply" ? e.entry.value.responderId : "")),
    ["u003", "u001"],
  );
  const exchange = await client.getAuditTrail({ correlationId: replies[0]!.correlationId });
  const kinds = new Set(exchange.map((e) => e.entry.case));
  assert.ok(kinds.has("reply") && kinds.has("notification"), [...kinds].join(","));
  assert.deepEqual(await client.getAuditTrail({ investigationId: id }), trail);

  // a watch of a finished investigation sends the trail and ends
  const watch = client.watchInvestigation(id);
  const watched = await watch.all();
  assert.deepEqual(
    watched.map((e) => e.seq),
    trail.map((e) => e.seq),
  );
  const tail = await client.watchInvestigation(id, { afterSeq: trail.length - 1 }).all();
  assert.deepEqual(
    tail.map((e) => e.seq),
    [trail.length],
  );

  // aborting the signal stops the watch at once: what had arrived is not handed out
  const ac = new AbortController();
  const stopped = client.watchInvestigation(id, { signal: ac.signal });
  const err = await rejection(
    (async () => {
      for await (const _ of stopped) ac.abort();
    })(),
  );
  assert.equal(err.code, Code.Canceled);
  assert.deepEqual(
    stopped.entries.map((e) => e.seq),
    [1],
  );
  assert.equal((await rejection(stopped.all())).code, Code.Canceled);
});

liveTest("a watch follows the investigation to its report", async () => {
  const first = await client.startInvestigation(unauthorised()).result();
  const id = first.investigationId;
  const seen = (await client.getAuditTrail(id)).length;
  const watching = client.watchInvestigation(id, { afterSeq: seen, signal: AbortSignal.timeout(30_000) }).all();
  const second = await client
    .respond({ investigationId: id, actionId: `${id}-changer`, role: "changer", responderId: "u003", text: "Covering for u006." })
    .result();
  await client
    .respond({
      investigationId: id,
      actionId: second.awaiting[0]!.actionId,
      role: ResponderRole.MANAGER,
      responderId: "u001",
      decision: ManagerDecision.APPROVE,
    })
    .result();
  const watched = await watching;
  assert.equal(watched[0]?.seq, seen + 1);
  const last = watched.at(-1)!;
  assert.equal(last.entry.case, "statusChange");
  assert.equal(last.entry.case === "statusChange" && last.entry.value.to, S.ADVISORY_REPORT_GENERATED);
});

liveTest("a wrong responder is PERMISSION_DENIED with reason WRONG_RESPONDER", async () => {
  const { investigationId } = await client.startInvestigation(unauthorised()).result();
  const actionId = `${investigationId}-changer`;
  const wrongPerson = await rejection(
    client.respond({ investigationId, actionId, role: "changer", responderId: "u001", text: "it was me" }).result(),
  );
  assert.equal(wrongPerson.code, Code.PermissionDenied);
  assert.equal(wrongPerson.codeName, "PERMISSION_DENIED");
  assert.equal(wrongPerson.reason, "WRONG_RESPONDER");
  const wrongRole = await rejection(
    client.respond({ investigationId, actionId, role: "manager", responderId: "u003", decision: "approve" }).result(),
  );
  assert.equal(wrongRole.code, Code.PermissionDenied);
  assert.equal(wrongRole.reason, "WRONG_RESPONDER");
  assert.equal((await client.getInvestigation(investigationId)).status, S.AWAITING_USER_RESPONSE);
  assert.throws(
    () => client.respond({ investigationId, actionId, role: "auditor" as never, responderId: "u003" }),
    TypeError,
  );
});

liveTest("unknown investigations and mutations are NOT_FOUND", async () => {
  const unknown = `INV-ts-unknown-${crypto.randomUUID().slice(0, 8)}`;
  const get = await rejection(client.getInvestigation(unknown));
  assert.equal(get.code, Code.NotFound);
  assert.equal(get.reason, "NOT_FOUND");
  const respond = await rejection(
    client
      .respond({ investigationId: unknown, actionId: `${unknown}-changer`, role: "changer", responderId: "u003", text: "x" })
      .result(),
  );
  assert.equal(respond.code, Code.NotFound);
  const start = await rejection(client.startInvestigation(`ts-no-such-mutation-${freshId()}`).result());
  assert.equal(start.code, Code.NotFound);
  assert.equal(start.reason, "NOT_FOUND");
});

liveTest("an invalid inline mutation is INVALID_ARGUMENT", async () => {
  const err = await rejection(client.startInvestigation({ ...authorised(), accessLevel: "Root" }).result());
  assert.equal(err.code, Code.InvalidArgument);
  assert.deepEqual(
    err.fieldViolations.map((v) => v.field),
    ["inline_mutation.access_level"],
  );
});

liveTest("listInvestigations pages, and an idempotency key replays the start", async () => {
  const mutation = authorised();
  const key = crypto.randomUUID();
  const first = await client.startInvestigation(mutation, { idempotencyKey: key }).result();
  const replay = client.startInvestigation(mutation, { idempotencyKey: key });
  const again = await replay.result();
  assert.equal(again.investigationId, first.investigationId);
  assert.equal(again.status, first.status);
  assert.deepEqual(replay.messages, [], "replayed, not run again");
  await client.startInvestigation(authorised()).result();

  const page = await client.listInvestigations({ pageSize: 1 });
  assert.equal(page.investigations.length, 1);
  assert.ok(page.nextPageToken);
  const page2 = await client.listInvestigations({ pageSize: 1, pageToken: page.nextPageToken });
  assert.equal(page2.investigations.length, 1);
  assert.notEqual(page2.investigations[0]?.investigationId, page.investigations[0]?.investigationId);
  let found = false;
  for await (const inv of client.allInvestigations({ status: "advisory_report_generated", pageSize: 50 })) {
    if (inv.investigationId === first.investigationId) found = true;
  }
  assert.ok(found);
  await assert.rejects(client.listInvestigations({ status: "open" as never }), TypeError);
});
