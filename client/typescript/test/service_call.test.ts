// The service_call workflow's state: the accessor and context helpers (offline), and a live call
// as startConversation and getConversation report it. The scripted demo model cannot run a turn
// of the shipped flow (its navigator needs a real model's choice among each node's children), so
// no turn is sent here; examples/service_call.ts runs a whole call against a real model.
import assert from "node:assert/strict";
import { after, before, test } from "node:test";

import { create } from "@bufbuild/protobuf";
import {
  CONVERSATION_ENDED,
  ConversationSchema,
  FrontdeskClient,
  IntakeStateSchema,
  ServiceCallStateSchema,
  intakeState,
  serviceCallContext,
  serviceCallState,
} from "@frontdesk/client";
import { addr, baseUrl, liveTest } from "./helpers.js";

let client: FrontdeskClient;
before(() => {
  if (addr !== "") client = new FrontdeskClient({ baseUrl, timeoutMs: 10_000 });
});
after(() => client?.close());

test("the accessors pick the state of the conversation's workflow", () => {
  const call = create(ConversationSchema, {
    workflow: "service_call",
    state: {
      case: "serviceCall",
      value: create(ServiceCallStateSchema, {
        currentNode: "Plan",
        contextJson: JSON.stringify({ customer_id: "CUS-00001", flags: { plan_flag: 1 } }),
        nodeTraversalPath: ["GREET_CUSTOMER", "Plan"],
        callEnded: true,
        modelCalls: 3,
        promptTokens: 120n,
        completionTokens: 14n,
      }),
    },
  });
  const state = serviceCallState(call);
  assert.ok(state);
  assert.equal(state.currentNode, "Plan");
  assert.ok(state.callEnded);
  assert.deepEqual(state.nodeTraversalPath, ["GREET_CUSTOMER", "Plan"]);
  assert.deepEqual(serviceCallContext(state), { customer_id: "CUS-00001", flags: { plan_flag: 1 } });
  assert.equal(intakeState(call), undefined);

  const intake = create(ConversationSchema, {
    workflow: "intake",
    state: { case: "intake", value: create(IntakeStateSchema, { missingFields: ["budget"] }) },
  });
  assert.equal(serviceCallState(intake), undefined);
  assert.deepEqual(intakeState(intake)?.missingFields, ["budget"]);

  assert.equal(serviceCallState(undefined), undefined);
  assert.equal(serviceCallState(create(ConversationSchema)), undefined);
  assert.deepEqual(serviceCallContext(create(ServiceCallStateSchema)), {});
  assert.equal(CONVERSATION_ENDED, "CONVERSATION_ENDED");
});

liveTest("a new call starts at the greeting", async () => {
  assert.ok((await client.listWorkflows()).some((w) => w.name === "service_call"));
  const graph = new Set((await client.describeWorkflow("service_call")).nodes.map((n) => n.name));
  for (const node of ["receive", "navigator", "GREET_CUSTOMER", "Execute_Call_Hangup"]) assert.ok(graph.has(node), node);

  const started = await client.startConversation({ workflow: "service_call" });
  assert.equal(started.conversation?.workflow, "service_call");
  assert.ok(started.welcome?.text);
  const state = serviceCallState(started.conversation);
  assert.ok(state);
  assert.equal(state.currentNode, "GREET_CUSTOMER");
  assert.equal(state.callEnded, false);
  assert.deepEqual([...state.missingMandatoryFields].sort(), ["customer_phone_number", "customers_main_ask"]);
  assert.deepEqual(state.nodeTraversalPath, []);
  assert.deepEqual([state.modelCalls, state.promptTokens, state.completionTokens], [0, 0n, 0n]);
  const context = serviceCallContext(state);
  assert.ok(context.agent_session_id);
  assert.equal(context.call_ended, false);

  const got = await client.getConversation(started.conversation!.conversationId);
  assert.deepEqual(serviceCallState(got.conversation), state);
  assert.equal(intakeState(started.conversation), undefined);
});
