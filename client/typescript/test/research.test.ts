// ResearchService against the live server. The scripted demo model answers every research
// purpose with a standing reply (tests/fixtures/demo-script.json): a plan of two research steps
// ("Find who invented CRISPR gene editing", "Find when the transistor was invented") and one
// expert step, every critic approving ("Looks complete."), each researcher citing passage 0 of
// the sample corpus's "crispr" document. So every question is answered on the first pass.
import assert from "node:assert/strict";
import { after, before } from "node:test";

import {
  Code,
  CriticDecision,
  FrontdeskClient,
  ResearchOutcome,
  ResearchStep,
  eventKind,
  type Research,
} from "@frontdesk/client";
import { addr, baseUrl, liveTest, rejection } from "./helpers.js";

let client: FrontdeskClient;
before(() => {
  if (addr !== "") client = new FrontdeskClient({ baseUrl, timeoutMs: 10_000 });
});
after(() => client?.close());

const QUESTION = "Who invented CRISPR gene editing, and when was the transistor invented?";
const STEPS = ["Find who invented CRISPR gene editing", "Find when the transistor was invented"];
const CRITICS = ["critic_planner", "critic_researcher", "critic_researcher", "critic_expert"];

/** The question, made unique so that tests sharing the server tell their research apart. */
const question = () => `${QUESTION} (ts ${crypto.randomUUID().slice(0, 8)})`;

liveTest("a question is answered, with its plan, results and critic decisions streamed", async () => {
  const text = question();
  const stream = client.ask(text);
  const types: string[] = [];
  let last: Research | undefined;
  for await (const item of stream) {
    assert.equal(last, undefined, "nothing may follow the research");
    types.push(item.type);
    if (item.type === "research") last = item.research;
  }
  assert.ok(last);
  assert.equal(await stream.result(), last);
  assert.equal(eventKind(stream.events[0]!), "runStarted");
  assert.equal(eventKind(stream.events.at(-1)!), "runFinished");
  // a plan comes before any result, every result before the expert's answer
  assert.ok(types.indexOf("plan") < types.indexOf("researchResult"));
  assert.ok(types.lastIndexOf("researchResult") < types.indexOf("expertAnswer"));

  assert.equal(stream.plans.length, 1);
  const plan = stream.plans[0]!;
  assert.deepEqual(plan.researchSteps, STEPS);
  assert.deepEqual(plan.expertSteps, ["Combine the findings"]);
  assert.equal(plan.attempt, 1);
  assert.deepEqual(
    stream.results.map((r) => [r.stepId, r.step]).sort(),
    STEPS.map((s, i) => [i, s]),
  );
  assert.deepEqual(
    stream.criticDecisions.map((v) => v.critic),
    CRITICS,
  );
  for (const v of stream.criticDecisions) {
    assert.equal(v.decision, CriticDecision.APPROVE);
    assert.equal(v.feedback, "Looks complete.");
    assert.equal(v.retryCount, 0);
  }
  assert.equal(stream.expertAnswers.length, 1);
  const first = stream.messages[0]!;
  assert.deepEqual([first.sender, first.receiver, first.type], ["orchestrator", "planner", "instruction"]);

  assert.match(last.researchId, /^RES-/);
  assert.equal(last.question, text);
  assert.equal(last.corpus, "sample");
  assert.equal(last.outcome, ResearchOutcome.ANSWERED);
  assert.equal(last.currentStep, ResearchStep.FINALIZER);
  assert.equal(last.retryCount, 0);
  assert.equal(last.retryLimit, 5);
  assert.deepEqual(last.plan?.researchSteps, STEPS);
  assert.deepEqual(
    last.results.map((r) => [r.stepId, r.step]),
    STEPS.map((s, i) => [i, s]),
  );
  for (const r of last.results) {
    assert.ok(r.answer);
    assert.equal(r.citations.length, 1);
    const c = r.citations[0]!;
    assert.deepEqual([c.documentId, c.passage], ["crispr", 0]);
    assert.ok(c.documentTitle && c.text);
  }
  assert.equal(last.expert?.answer, stream.expertAnswers[0]!.answer);
  assert.match(last.finalAnswer, /^Scripted demo:/);
  assert.ok(last.finalReasoningTrace);
  assert.equal(last.error, "");
  assert.equal(last.messages.length, stream.messages.length);
});

liveTest("getResearch and listResearch", async () => {
  const ids: string[] = [];
  for (let i = 0; i < 2; i++) ids.push((await client.ask(question()).result()).researchId);

  const got = await client.getResearch(ids[0]!);
  assert.equal(got.researchId, ids[0]);
  assert.equal(got.outcome, ResearchOutcome.ANSWERED);
  assert.deepEqual(
    got.results.map((r) => r.stepId),
    [0, 1],
  );

  const page = await client.listResearch({ pageSize: 1 });
  assert.equal(page.research.length, 1);
  assert.notEqual(page.nextPageToken, "");
  const page2 = await client.listResearch({ pageSize: 1, pageToken: page.nextPageToken });
  assert.equal(page2.research.length, 1);
  assert.notEqual(page2.research[0]!.researchId, page.research[0]!.researchId);
  const listed: string[] = [];
  for await (const r of client.allResearch({ pageSize: 50 })) listed.push(r.researchId);
  for (const id of ids) assert.ok(listed.includes(id), `${id} listed`);
  assert.deepEqual(listed, [...listed].sort(), "ordered by research id");

  const tooBig = await rejection(client.listResearch({ pageSize: 101 }));
  assert.equal(tooBig.code, Code.InvalidArgument);
});

liveTest("retryLimit and corpus are sent", async () => {
  const r = await client.ask(question(), { retryLimit: 2, corpus: "sample" }).result();
  assert.equal(r.outcome, ResearchOutcome.ANSWERED);
  assert.equal(r.retryLimit, 2);
  assert.equal(r.corpus, "sample");
});

liveTest("invalid questions are INVALID_ARGUMENT, unknown research NOT_FOUND", async () => {
  const empty = await rejection(client.ask("").result());
  assert.equal(empty.code, Code.InvalidArgument);
  assert.equal(empty.reason, "INVALID_ARGUMENT");
  const limit = await rejection(client.ask(QUESTION, { retryLimit: 21 }).result());
  assert.equal(limit.code, Code.InvalidArgument);
  const corpus = await rejection(client.ask(QUESTION, { corpus: `no-such-corpus-${crypto.randomUUID().slice(0, 6)}` }).result());
  assert.equal(corpus.code, Code.InvalidArgument);
  const missing = await rejection(client.getResearch(`RES-ts-unknown-${crypto.randomUUID().slice(0, 8)}`));
  assert.equal(missing.code, Code.NotFound);
  assert.equal(missing.reason, "NOT_FOUND");
});

liveTest("an idempotency key returns the first outcome", async () => {
  const text = question();
  const key = crypto.randomUUID();
  const first = await client.ask(text, { idempotencyKey: key }).result();
  const again = await client.ask(text, { idempotencyKey: key }).result();
  assert.equal(again.researchId, first.researchId);
  assert.equal(again.outcome, first.outcome);
  assert.equal(again.finalAnswer, first.finalAnswer);
});
