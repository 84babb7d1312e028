// Package recording is Airlock's neutral model of a recorded model session: the ordered
// messages (system, user, assistant, tool) of one turn as a real model and real tools produced
// them, the assistant messages' calls with their recorded ids (or the recorded fact that there
// was none), and the recorded tool results and errors.
//
// The replay provider (internal/inference) and the replay capabilities (internal/capabilities)
// read only this package; benchmark formats (AgentDojo traces, tau-bench trajectories) are
// adapters at the edge that build a Session (agentdojo.Trace.Recording, taubench turns through
// the same adapter), so the core knows no corpus.
//
// # Rounds
//
// A Session replays as one Airlock turn: optional system messages, exactly one user message
// (the turn's task), then rounds. Round r (1-based) is the r-th assistant message after the
// user message, followed by the tool messages that answer its calls. Session.Rounds refuses,
// with ErrUnsupported, any shape a single turn cannot serve faithfully: no user message, a
// second user message (a second exchange), or an assistant message before the user's task (for
// example an AgentDojo defense pipeline whose tool filter answers with a tool list first).
// Such a recording is never served partially: serving the pre-task message as round 1 would end
// the turn early and report it answered.
//
// # Call ids
//
// A structured call keeps its recorded id. A structured call recorded with an empty id or with
// no id at all (Gemini and Command-R style, some OpenAI-compatible servers) is served without
// one, exactly as recorded; Airlock's parser then assigns it the deterministic id
// parse.AssignedCallID(round, index) and marks it assigned. Round.WireID gives the same id, so
// the recorded result is found for it. A call the benchmark harness read out of the message
// text (Call.Text) was never a structured call: it is not served, and the text reaches the
// strict parser as text (embedded_tool_call_text).
package recording
