// Package eval is Airlock's standing evaluation on real model behaviour: it replays recorded
// sessions of real models (AgentDojo traces, tau-bench trajectories) as real turns through
// Temporal and the store, and reports what Airlock decided about every call.
//
// A Case is one recorded run: one or more turns of one conversation. Run starts one worker per
// suite (each suite's capabilities are generated from its tools file with the registry's own
// side-effect class, so suites that share tool names never meet), an approver that decides
// every pending confirmation by policy (deny-all or approve-all) through the same sealed-token
// signal an approver surface sends, and replays the cases concurrently. Every assistant
// message is served by the replay provider and every tool result by replay capabilities; each
// call goes through the strict parser and the six-stage executor exactly as a live call does.
// When Airlock decides differently from the recording (a parse failure, a rejection, a held
// and denied call, a budget) the turn stops there and the decision is recorded.
//
// Report aggregates the results per benchmark × model × suite × attack (see Row) and renders
// them as a text table or JSON.
package eval
