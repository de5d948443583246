// Triage one customer message and print the ticket resolution, the run's events and the result.
//   node build/examples/triage.js [HOST:PORT] [CUSTOMER_ID] [MESSAGE]
// The address defaults to $FRONTDESK_ADDR, then 127.0.0.1:50051; the customer to CUST-001.
// $FRONTDESK_KEY, when set, is the API key.
import {
  FrontdeskClient,
  FrontdeskError,
  RecommendedAction,
  TicketStatus,
  eventKind,
} from "@frontdesk/client";

const addr = process.argv[2] ?? process.env.FRONTDESK_ADDR ?? "127.0.0.1:50051";
const customerId = process.argv[3] ?? "CUST-001";
const text = process.argv[4] ?? "I was charged twice for my subscription this month.";

const client = new FrontdeskClient({ baseUrl: `http://${addr}`, apiKey: process.env.FRONTDESK_KEY || undefined });
try {
  console.log(`customer ${customerId}: ${text}`);
  const stream = client.triageTicket(customerId, text, {
    subject: "Billing question",
    signal: AbortSignal.timeout(30_000),
  });
  for await (const item of stream) {
    if (item.type === "resolution") {
      const r = item.resolution;
      console.log(`ticket ${r.ticketId} (${r.matchedExisting ? "continues" : "new"})`);
    } else if (item.type === "event") {
      const ev = item.event;
      const detail = ev.kind.case === "toolCalled" ? ` ${ev.kind.value.name}` : "";
      console.log(`  event ${String(ev.eventId).padStart(2)} ${eventKind(ev).padEnd(16)} ${ev.node}${detail}`);
    } else {
      const r = item.result;
      console.log(`result: ${RecommendedAction[r.recommendedAction]} -> ${TicketStatus[r.status]}`);
      console.log(`suggested response: ${r.suggestedResponse}`);
    }
  }
  const { tickets } = await client.listTickets(customerId, { pageSize: 5 });
  console.log(`recent tickets: ${tickets.map((t) => t.ticketId).join(", ")}`);
} catch (e) {
  if (!(e instanceof FrontdeskError)) throw e;
  console.error(`error: ${e.codeName} reason=${e.reason} ${e.rawMessage}`);
  process.exitCode = 1;
} finally {
  client.close();
}
