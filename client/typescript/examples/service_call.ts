// A customer-service phone call on the service_call workflow: start the call, say the customer's
// lines one by one and print, per turn, the agent's reply, the nodes that ran, the tool calls
// (arguments, result or error, latency) and the node the call is at; at the end the call's
// context and token counts and, once the call was hung up, that a further message is refused
// with FAILED_PRECONDITION, reason CONVERSATION_ENDED.
//
//   node build/examples/service_call.js [HOST:PORT] [--turns N]
//
// The address defaults to $FRONTDESK_ADDR, then 127.0.0.1:50051; $FRONTDESK_KEY, when set, is
// the API key. --turns N says at most the first N customer lines (default: all of them, until
// the call ends).
//
// A real model drives the whole call: the greeting, the customer's issue, their contact details,
// the customer record, the task, the booking and the hangup. The scripted demo model
// (--model-provider scripted --model-script tests/fixtures/demo-script.json) cannot: after every
// node with branching conditions, GREET_CUSTOMER included, the navigator must name one of that
// node's children, which no standing answer can do for every node, so already the first turn
// fails (INTERNAL, "node navigator failed"). Against it run --turns 0: the call is started and
// its initial state shown (scripts/sdk-tests.sh does so).
import type { Duration } from "@bufbuild/protobuf/wkt";
import {
  CONVERSATION_ENDED,
  FrontdeskClient,
  FrontdeskError,
  eventKind,
  serviceCallContext,
  serviceCallState,
  type RunEvent,
  type ServiceCallState,
  type TurnResult,
} from "@frontdesk/client";

// The customer's side of a short call (a drywall repair), one line per turn.
const CUSTOMER_LINES = [
  "Hello, I need help with drywall repair",
  "There is a hole in my living room wall",
  "It happened yesterday when I moved a cupboard",
  "Thanks, that is good to hear",
  "Sure",
  "I'm John Doe, my number is 555-1234",
  "Yes please, book the technician",
  "Great, thank you",
  "No, that's all",
  "Bye",
];

// Graph nodes of the workflow that are not nodes of the flow configuration.
const NOT_FLOW_NODES = new Set(["receive", "navigator"]);

const args = process.argv.slice(2);
let addr = process.env.FRONTDESK_ADDR ?? "127.0.0.1:50051";
let maxTurns = CUSTOMER_LINES.length;
for (let i = 0; i < args.length; i++) {
  if (args[i] === "--turns") maxTurns = Number.parseInt(args[++i] ?? "", 10);
  else addr = args[i]!;
}
if (!Number.isInteger(maxTurns) || maxTurns < 0) {
  console.error("--turns needs a number of customer lines, 0 or more");
  process.exit(2);
}

function millis(d: Duration | undefined): string {
  const ms = d === undefined ? 0 : Number(d.seconds) * 1000 + d.nanos / 1e6;
  return ms >= 1 ? `${ms.toFixed(0)} ms` : `${ms.toFixed(2)} ms`;
}

/** The nodes that ran and the tool calls of one turn, then the reply and the current node. */
function printTurn(events: readonly RunEvent[], result: TurnResult | undefined): void {
  const nodes = events
    .filter((e) => e.kind.case === "nodeStarted" && !NOT_FLOW_NODES.has(e.node))
    .map((e) => e.node);
  console.log(`  nodes: ${nodes.length > 0 ? nodes.join(" -> ") : "(none)"}`);
  const called = new Map<string, { node: string; name: string; argumentsJson: string }>();
  for (const e of events) {
    if (e.kind.case === "toolCalled") {
      called.set(e.kind.value.callId, { node: e.node, ...e.kind.value });
    } else if (e.kind.case === "toolReturned") {
      const t = e.kind.value;
      const args = called.get(t.callId)?.argumentsJson ?? "?";
      called.delete(t.callId);
      const outcome = t.isError ? `error ${t.resultJson}` : t.resultJson;
      console.log(`  tool [${e.node}] ${t.name}(${args}) -> ${outcome} (${millis(t.latency)})`);
    }
  }
  for (const c of called.values()) console.log(`  tool [${c.node}] ${c.name}(${c.argumentsJson}) -> no result`);
  if (result === undefined) return;
  const state = serviceCallState(result.conversation);
  console.log(`agent (${result.reply?.node || "-"}): ${result.reply?.text || "(no reply)"}`);
  if (state !== undefined) {
    console.log(`  current node: ${state.currentNode || "(none)"}`);
    if (state.callEnded) console.log("  the call has ended");
  }
}

function printState(state: ServiceCallState): void {
  console.log(`current node: ${state.currentNode || "(none)"}`);
  console.log(`node traversal path: ${state.nodeTraversalPath.join(" -> ") || "(none)"}`);
  console.log(`missing mandatory fields: ${state.missingMandatoryFields.join(", ") || "none"}`);
  console.log(`context: ${JSON.stringify(serviceCallContext(state), null, 2)}`);
  console.log(
    `model calls: ${state.modelCalls}, tokens: ${state.promptTokens} prompt + ${state.completionTokens} completion`,
  );
  console.log(`call ended: ${state.callEnded ? "yes" : "no"}`);
}

const client = new FrontdeskClient({
  baseUrl: `http://${addr}`,
  apiKey: process.env.FRONTDESK_KEY || undefined,
  timeoutMs: 30_000,
});
try {
  const started = await client.startConversation({ workflow: "service_call" });
  const callId = started.conversation!.conversationId;
  const initial = serviceCallState(started.conversation);
  if (initial === undefined) throw new Error(`conversation ${callId} has no service-call state`);
  console.log(`conversation ${callId}`);
  console.log(`agent (${started.welcome?.node}): ${started.welcome?.text}`);
  console.log(`  current node: ${initial.currentNode}`);

  let turns = 0;
  for (const text of CUSTOMER_LINES.slice(0, maxTurns)) {
    console.log(`customer: ${text}`);
    const stream = client.sendMessage(callId, text, { signal: AbortSignal.timeout(60_000) });
    let result: TurnResult | undefined;
    try {
      for await (const item of stream) {
        if (item.type === "result") result = item.result;
      }
    } catch (e) {
      printTurn(stream.events, undefined);
      throw e;
    }
    printTurn(stream.events, result);
    turns++;
    if (serviceCallState(result?.conversation)?.callEnded) break;
  }

  // The call as the server keeps it: its context and what the models used.
  const state = serviceCallState((await client.getConversation(callId)).conversation)!;
  console.log(`after ${turns} turn(s):`);
  printState(state);
  if (!state.callEnded) {
    if (turns < CUSTOMER_LINES.length) {
      console.log(`stopped after ${turns} turn(s) (--turns); a real model drives the whole call`);
    }
  } else {
    // After the hangup the call takes no more messages.
    try {
      await client.sendMessage(callId, "Hello? Are you still there?").result();
      console.error("error: a message after the hangup was accepted");
      process.exitCode = 1;
    } catch (e) {
      if (!(e instanceof FrontdeskError) || e.reason !== CONVERSATION_ENDED) throw e;
      console.log(`a further message is refused: ${e.codeName} ${e.reason}`);
    }
  }
} catch (e) {
  if (!(e instanceof FrontdeskError)) throw e;
  console.error(`error: ${e.codeName} reason=${e.reason} ${e.rawMessage}`);
  process.exitCode = 1;
} finally {
  client.close();
}
