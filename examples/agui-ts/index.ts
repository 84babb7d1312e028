// A chat backend in TypeScript on Airlock's application API, with only published npm
// packages: the official AG-UI client (@ag-ui/client's HttpAgent) runs a turn in a thread,
// prints its streamed text and tool results, and stops at Airlock's interrupt (a call that
// needs a human). With APPROVER_KEY set (an approver's API key: never the requester's own,
// four-eyes) it resumes the interrupt with a decision and prints the turn's end.
//
//   AIRLOCK_API_URL=http://127.0.0.1:8092 AIRLOCK_API_KEY=alk_... THREAD=demo \
//   MESSAGE="fetch https://example.com" APPROVER_KEY=alk_... node index.js
import { HttpAgent, type Interrupt } from "@ag-ui/client";

const url = (process.env.AIRLOCK_API_URL ?? "http://127.0.0.1:8092") + "/v1/agui";
const threadId = process.env.THREAD ?? "demo";

function agent(key: string): HttpAgent {
  return new HttpAgent({ url, threadId, headers: { Authorization: `Bearer ${key}` } });
}

// Everything in these events was written by a model or a tool: show it, never trust it.
const print = (kind: string, text: string) => console.log(`${kind}: ${JSON.stringify(text)}`);

async function run(a: HttpAgent, params: Parameters<HttpAgent["runAgent"]>[0]): Promise<Interrupt[]> {
  let interrupts: Interrupt[] = [];
  await a.runAgent(params, {
    onTextMessageContentEvent: ({ event }) => print("text", event.delta),
    onToolCallStartEvent: ({ event }) => print("tool call", event.toolCallName),
    onToolCallResultEvent: ({ event }) => print("tool result", typeof event.content === "string" ? event.content : "[parts]"),
    onRunFinishedEvent: (p) => {
      if (p.outcome === "interrupt") {
        interrupts = p.interrupts;
        for (const it of p.interrupts) {
          const airlock = (it.metadata?.airlock ?? {}) as { mayDecide?: boolean; whoMayDecide?: string };
          print("interrupt", `${it.id} ${it.message ?? ""} (who may decide: ${airlock.whoMayDecide})`);
        }
      } else {
        console.log(`finished: ${p.outcome}`);
      }
    },
    onRunErrorEvent: ({ event }) => print("error", event.message),
  });
  return interrupts;
}

const requester = agent(process.env.AIRLOCK_API_KEY ?? "");
requester.addMessage({ id: `u-${Date.now()}`, role: "user", content: process.env.MESSAGE ?? "hello" });
const interrupts = await run(requester, { runId: `run-${Date.now()}` });
const approverKey = process.env.APPROVER_KEY;
if (interrupts.length > 0 && approverKey) {
  const decision = process.env.DECISION ?? "approve";
  await run(agent(approverKey), {
    runId: `run-${Date.now()}-resume`,
    resume: interrupts.map((it) => ({ interruptId: it.id, status: "resolved" as const, payload: { decision, reason: "decided in the example" } })),
  });
}
