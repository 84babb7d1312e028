// Package agentdojo reads the recorded AgentDojo corpus (../shared/corpus/agentdojo): traces of
// real models calling tools, with injected tool outputs, and the suites' tool definitions.
//
// A trace is read as recorded: message content is normalized to a string (AgentDojo writes a
// string, null, or a list of text blocks), but tool-call arguments are kept byte for byte as they
// appear in the file, so Airlock's strict parser sees exactly what was recorded. Nothing here
// parses the Llama-style `<function=name>{…}</function>` text that prompt-format models write;
// it stays in the message content.
//
// Each assistant message is one step (Trace.Steps); the tool messages that follow it are the
// recorded observations, matched to the calls by tool_call_id, or by position when the recorded
// ids are null (Llama-3.3 traces).
//
// The replay core never reads traces: Trace.Recording adapts a trace to the neutral
// internal/recording model (Recorded wraps a loader, RecordingTools adapts the tool
// definitions), keeping each call's recorded id, or the fact that none was recorded, and
// marking the calls AgentDojo's prompt-format pipelines read out of the text.
package agentdojo
