// Package bench runs Airlock's reference workload (issue 12) and measures it: the same turn
// the peer benchmarks run on LangGraph.js and on a bare Temporal loop (../shared/bench), on a
// real Temporal server and a real PostgreSQL store, with an in-process Airlock worker and the
// real client path, every executor check on.
//
// A turn is 4 inference rounds: rounds 1–3 each propose one automatic read-only call
// lookup({"key":"k<round>"}), round 4 answers "done: v1,v2,v3". The model and the tool answer
// at once. In the approval variant the round-2 call is lookup_confirmed, which needs a human
// confirmation; an approver goroutine learns it from the store's pending list and approves it
// through the real decision path (a signed, attested decide update).
//
// Model classes: recorded (the script served as a recorded session by the replay provider;
// inference runs as local activities) and network (a local HTTP server speaking the OpenAI
// chat-completions API, served through the OpenAI provider as a live model), the latter with
// regular and with local inference activities.
package bench
