// Investigate an HR mutation that was not authorised, answer as the changer and as the
// manager, then print the advisory report and the audit trail.
//   node build/examples/investigation.js [HOST:PORT]
// The mutation is given inline with a fresh id (mutation 1002 of the sample HR data, as the
// changer u003 made it: Payroll at Admin, which u003 is not authorised for), so the example can
// run again and again on one server. The address defaults to $FRONTDESK_ADDR, then
// 127.0.0.1:50051; $FRONTDESK_KEY, when set, is the API key.
import {
  Agent,
  AgentAction,
  AgentMessageStatus,
  FrontdeskClient,
  FrontdeskError,
  InvestigationStatus,
  Recommendation,
  ResponderRole,
  eventKind,
  type Investigation,
  type InvestigationStream,
  type PendingAction,
} from "@frontdesk/client";

const addr = process.argv[2] ?? process.env.FRONTDESK_ADDR ?? "127.0.0.1:50051";
const signal = AbortSignal.timeout(60_000);

/** Prints the run's progress as it arrives and returns the investigation. */
async function follow(stream: InvestigationStream): Promise<Investigation> {
  for await (const item of stream) {
    if (item.type === "event") {
      const ev = item.event;
      const kind = eventKind(ev);
      if (!["nodeStarted", "toolCalled", "runInterrupted", "runFinished"].includes(kind)) continue;
      const detail = ev.kind.case === "toolCalled" ? ` ${ev.kind.value.name}` : "";
      console.log(`  event ${String(ev.eventId).padStart(3)} ${kind.padEnd(17)} ${ev.node}${detail}`);
    } else if (item.type === "message") {
      const m = item.message;
      console.log(
        `  message ${Agent[m.sender]} -> ${Agent[m.receiver]}: ${AgentAction[m.action]} (${AgentMessageStatus[m.status]})`,
      );
    } else if (item.type === "statusChange") {
      const c = item.statusChange;
      console.log(`  status ${InvestigationStatus[c.from]} -> ${InvestigationStatus[c.to]}`);
    }
  }
  const investigation = await stream.result();
  console.log(`investigation ${investigation.investigationId} -> ${InvestigationStatus[investigation.status]}`);
  return investigation;
}

function showAction(a: PendingAction): void {
  console.log(`pending action ${a.actionId} for ${a.recipientId} (${ResponderRole[a.recipientRole]}): ${a.subject}`);
}

const client = new FrontdeskClient({ baseUrl: `http://${addr}`, apiKey: process.env.FRONTDESK_KEY || undefined });
try {
  const mutation = {
    mutationId: `example-ts-${crypto.randomUUID().replaceAll("-", "").slice(0, 10)}`,
    changerId: "u003",
    targetUserId: "u007",
    system: "Payroll",
    accessLevel: "Admin",
    changeType: "salary_change",
    description: "Raised monthly salary by 4%",
    changedAt: new Date("2025-11-10T14:30:00Z"),
  };
  console.log(`mutation ${mutation.mutationId}: ${mutation.changerId} changed ${mutation.system} at ${mutation.accessLevel}`);
  let investigation = await follow(client.startInvestigation(mutation, { signal }));
  const investigationId = investigation.investigationId;

  // The changer is asked why: find the notification among u003's pending actions.
  // The list is paged, oldest first: allPendingActions reads every page.
  let changer: PendingAction | undefined;
  for await (const a of client.allPendingActions({ recipientId: "u003", pageSize: 100 }, { signal })) {
    if (a.investigationId === investigationId) changer = a;
  }
  if (changer === undefined) throw new Error(`no pending action of ${investigationId} for u003`);
  showAction(changer);
  investigation = await follow(
    client.respond(
      {
        investigationId,
        actionId: changer.actionId,
        role: "changer",
        responderId: changer.recipientId,
        text: "I stood in for Frank (u006), who was on vacation.",
      },
      { signal },
    ),
  );

  // The claim holds, so the changer's manager is asked to approve or deny.
  const manager = investigation.awaiting[0];
  if (manager === undefined) throw new Error("no action awaits the manager");
  showAction(manager);
  investigation = await follow(
    client.respond(
      {
        investigationId,
        actionId: manager.actionId,
        role: "manager",
        responderId: manager.recipientId,
        text: "Confirmed with the team.",
        decision: "approve",
      },
      { signal },
    ),
  );

  const report = investigation.report;
  console.log(`report ${report?.reportId}: ${Recommendation[report?.recommendation ?? 0]}`);
  console.log(`summary: ${report?.summary}`);
  const trail = await client.getAuditTrail(investigationId);
  console.log(`audit trail (${trail.length} entries):`);
  for (const e of trail) {
    console.log(`  ${String(e.seq).padStart(3)} ${e.actor.padEnd(30)} ${e.entry.case ?? ""}`);
  }
} catch (e) {
  if (!(e instanceof FrontdeskError)) throw e;
  console.error(`error: ${e.codeName} reason=${e.reason} ${e.rawMessage}`);
  process.exitCode = 1;
} finally {
  client.close();
}
