// Package activities holds the side of a turn that touches the world: inference, the
// executor stages, the confirmation store, execution and the audit. Activities are methods on
// Activities, which holds their dependencies; workflows call them through a nil *Activities and
// never import anything this package does at run time. Activities never import workflows.
//
// Cost (DESIGN "Choose regular or local activities"): Infer for a network model and effectful
// or external Execute are regular activities (durable result, one server round trip and three
// history events each, plus the workflow task their completion schedules); Admit, IssueConfirmation, ConsumeConfirmation, Record, FinishTurn, local read-only Execute
// and Infer for a recorded session (replay, scripted) are local activities (one marker event
// each, no round trip).
package activities
