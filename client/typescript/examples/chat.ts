// Start a conversation, send a turn and print the run's events as they arrive.
//   node build/examples/chat.js [HOST:PORT] [MESSAGE]
// The address defaults to $FRONTDESK_ADDR, then 127.0.0.1:50051; $FRONTDESK_KEY, when set, is
// the API key.
import { FrontdeskClient, FrontdeskError, eventKind } from "@frontdesk/client";

const addr = process.argv[2] ?? process.env.FRONTDESK_ADDR ?? "127.0.0.1:50051";
const text = process.argv[3] ?? "Hi! What can you help me with?";

const client = new FrontdeskClient({ baseUrl: `http://${addr}`, apiKey: process.env.FRONTDESK_KEY || undefined });
try {
  const { conversation, welcome } = await client.startConversation({ workflow: "intake" });
  const id = conversation!.conversationId;
  console.log(`conversation ${id}`);
  console.log(`assistant: ${welcome?.text}`);
  console.log(`user: ${text}`);
  for await (const item of client.sendMessage(id, text, { signal: AbortSignal.timeout(30_000) })) {
    if (item.type === "event") {
      const kind = eventKind(item.event);
      if (kind === "tokenDelta") continue; // the streamed reply; the result carries it whole
      console.log(`  event ${String(item.event.eventId).padStart(2)} ${kind.padEnd(16)} ${item.event.node}`);
    } else {
      console.log(`assistant (${item.result.reply?.node}): ${item.result.reply?.text}`);
      console.log(`turns so far: ${item.result.conversation?.turnCount}`);
    }
  }
} catch (e) {
  if (!(e instanceof FrontdeskError)) throw e;
  console.error(`error: ${e.codeName} reason=${e.reason} ${e.rawMessage}`);
  process.exitCode = 1;
} finally {
  client.close();
}
