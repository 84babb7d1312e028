// Package taubench reads recorded tau-bench trajectories (../shared/corpus/tau-bench, from
// sierra-research/tau-bench historical_trajectories) and turns them into per-turn AgentDojo
// traces, adapted like any AgentDojo trace into the neutral recording model
// (RecordingLoader, agentdojo.Recorded), so the replay provider and the replay capabilities
// serve them unchanged without knowing the benchmark.
//
// A tau-bench trajectory is a multi-turn conversation between a simulated user and the agent:
// a system message (the domain policy), then user messages, each followed by the agent's
// assistant and tool messages until the next user message. Airlock models each user message as
// one turn of one conversation, so a trajectory becomes a list of Turns, and each Turn carries
// its own *agentdojo.Trace holding [system, this user message, this turn's assistant and tool
// messages]. The Trace's Steps are therefore the inference rounds of that turn alone, and each
// turn has its own replay session name (SessionName, SessionLoader).
//
// Messages are read as recorded: content is normalized to a string (a string as is, null as "",
// a list of text blocks joined with "\n"), tool-call arguments are kept byte for byte as the
// decoded "arguments" string (never re-encoded, even when they are not valid JSON), and call ids
// are kept as recorded. The recorded ids are not unique: gpt-4o's airline trajectories reuse ids
// across trajectories, across turns, and sometimes within one turn (for different calls with
// different results); a replay that looks results up by call id alone sees the first of them.
//
// Consequential classifies tools by side effect (fail closed: unknown tools are consequential),
// implementing the airline policy's rule that a booking change needs an explicit user "yes".
package taubench
