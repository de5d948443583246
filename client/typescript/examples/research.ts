// Ask a research question and follow the critic loop live: each plan, each research result with
// its citations, each critic decision and the expert's answer, then the final answer and the
// reasoning trace.
//   node build/examples/research.js [HOST:PORT] ["question"]
// The address defaults to $FRONTDESK_ADDR, then 127.0.0.1:50051; $FRONTDESK_KEY, when set, is
// the API key.
import {
  CriticDecision,
  FrontdeskClient,
  FrontdeskError,
  ResearchOutcome,
  eventKind,
} from "@frontdesk/client";

const addr = process.argv[2] ?? process.env.FRONTDESK_ADDR ?? "127.0.0.1:50051";
const question =
  process.argv[3] ?? "Who invented CRISPR gene editing, and when was the transistor invented?";
const signal = AbortSignal.timeout(120_000);

const client = new FrontdeskClient({ baseUrl: `http://${addr}`, apiKey: process.env.FRONTDESK_KEY || undefined });
try {
  console.log(`question: ${question}`);
  const stream = client.ask(question, { signal });
  for await (const item of stream) {
    switch (item.type) {
      case "event": {
        const ev = item.event;
        const kind = eventKind(ev);
        if (kind === "nodeStarted" || kind === "runFinished") {
          console.log(`  event ${String(ev.eventId).padStart(3)} ${kind.padEnd(17)} ${ev.node}`.trimEnd());
        }
        break;
      }
      case "plan": {
        const p = item.plan;
        console.log(`plan (attempt ${p.attempt}):`);
        p.researchSteps.forEach((step, i) => console.log(`  research ${i}: ${step}`));
        p.expertSteps.forEach((step, i) => console.log(`  expert ${i}: ${step}`));
        break;
      }
      case "researchResult": {
        const r = item.researchResult;
        console.log(`result [step ${r.stepId}] ${r.step} (attempt ${r.attempt}): ${r.answer}`);
        for (const c of r.citations) console.log(`  [${c.documentId}#${c.passage}] ${c.documentTitle}`);
        break;
      }
      case "criticDecision": {
        const v = item.criticDecision;
        console.log(`${v.critic}: ${CriticDecision[v.decision]} (retry ${v.retryCount}) ${v.feedback}`);
        break;
      }
      case "expertAnswer":
        console.log(`expert (attempt ${item.expertAnswer.attempt}): ${item.expertAnswer.answer}`);
        break;
      default:
      // orchestrator messages, and the research itself (below)
    }
  }
  const research = await stream.result();
  console.log(
    `research ${research.researchId} -> ${ResearchOutcome[research.outcome]} (retries ${research.retryCount} of ${research.retryLimit})`,
  );
  if (research.error !== "") console.log(`error in ${research.errorComponent}: ${research.error}`);
  console.log(`final answer: ${research.finalAnswer}`);
  console.log(`reasoning trace: ${research.finalReasoningTrace}`);
} catch (e) {
  if (!(e instanceof FrontdeskError)) throw e;
  console.error(`error: ${e.codeName} reason=${e.reason} ${e.rawMessage}`);
  process.exitCode = 1;
} finally {
  client.close();
}
