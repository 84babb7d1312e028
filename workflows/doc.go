// Package workflows holds the turn workflow: one durable Temporal workflow per conversation
// turn that loops inference → strict parsing → the executor stages, pauses for a human when a
// proposal needs confirmation, and returns prose plus structured results and citations
// (RFC-0004 multi-step loop; DESIGN "Flow of one turn"). Workflow code is deterministic: no
// wall clock, no randomness, no native goroutines, no I/O, no map ranging.
package workflows
