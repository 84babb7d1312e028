// Package presentation is the one presentation of a confirmation (issue 34, item 3): the facts
// every approver surface states about a call that waits for people — the approver page's card,
// `airlock pending` (text and --json), the client package, the application API's confirmation
// JSON and the notices (webhook JSON, Slack, e-mail) — built once, by Build, from the stored
// confirmation and what surrounds it (requester, votes so far, the user's request, the
// execution's outcome).
//
// Everything a model, a tool result, a client or an MCP server wrote is hostile: Build passes
// every such string through internal/display (hidden, control and bidirectional characters as
// <U+XXXX>, values cut at a limit with the whole visible form kept, flags naming what was made
// visible), so a surface that prints a Confirmation's strings prints nothing raw. Surfaces still
// escape for their medium (HTML, JSON, Slack plain_text). The registry's words (side effect,
// network, destination kind) are read from layers and MCP servers, so they go through display
// too.
//
// A Confirmation is a public contract: its JSON (snake_case) is the "confirmation" object of
// the application API and of the webhook notice schema airlock.notice.v1
// (docs/notice.v1.schema.json).
package presentation
