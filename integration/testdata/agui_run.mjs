// Drives Airlock's /v1/agui with the official AG-UI client (@ag-ui/client HttpAgent), as a
// front end would: MODE=start sends a user message, MODE=attach re-attaches to the thread's
// latest turn, MODE=resume answers the interrupt INTERRUPT with DECISION. Prints one JSON
// line: the event types seen, the pending interrupts, the messages, the result, or the error.
import { HttpAgent } from "@ag-ui/client";

const { AIRLOCK_API_URL: url, AIRLOCK_API_KEY: key, THREAD: threadId, MODE: mode, MESSAGE, INTERRUPT, DECISION, RUN } = process.env;
const agent = new HttpAgent({ url: url + "/v1/agui", headers: { Authorization: "Bearer " + key }, threadId });
const types = [];
const finished = [];
const params = { runId: RUN };
if (mode === "start") agent.addMessage({ id: "u-" + RUN, role: "user", content: MESSAGE });
if (mode === "resume") params.resume = [{ interruptId: INTERRUPT, status: "resolved", payload: { decision: DECISION } }];
try {
  const res = await agent.runAgent(params, {
    onEvent: ({ event }) => { types.push(event.type); if (event.type === "RUN_FINISHED") finished.push(event); },
  });
  console.log(JSON.stringify({ ok: true, types, finished, interrupts: agent.pendingInterrupts, messages: agent.messages, result: res.result ?? null }));
} catch (e) {
  console.log(JSON.stringify({ ok: false, types, error: String(e && e.message || e), status: e && e.status }));
}
