// Package client is what client apps import to use Airlock: start a turn, wait for its
// result, list the confirmations waiting for a human and decide them. It owns the contract
// types a client needs (TurnRequest, TurnResult, PendingConfirmation, …), so nothing a client
// touches is an internal type; they are the worker's own types (aliases of package workflows),
// so values cross Temporal unchanged.
//
// A client is built on a Temporal client (New) or dials one (Dial, with TEMPORAL_ADDRESS,
// TEMPORAL_NAMESPACE and the SDK's other environment settings as defaults). Deciding needs
// more than Temporal: the Airlock store (to open the confirmation's sealed token), the
// approver key that seals tokens, and an approver credential that attests who decided
// (Options.DatabaseURL, Options.ApproverKeyFile, Options.CredentialFile). A client that only
// starts turns and reads results needs none of them, except the store when it lets Airlock
// number a conversation's turns (StartTurn; StartTurnSeq takes the number from the caller).
package client
