// Package airlockworker builds and runs an Airlock turn worker in a team's own Go module, with
// the team's own capabilities bound beside the built-in ones (issue 19, item 1).
//
// A team writes its capabilities as registry.Implementation values (registry.Typed for a Go
// argument struct), declares them in a registry layer file with its policy sidecar, and runs:
//
//	func main() {
//		airlockworker.Main(tickets.Get(client), tickets.Create(client))
//	}
//
// Main reads the same environment as `airlock worker` (OptionsFromEnv), runs the worker with
// the same gates, metrics, health, tracing and live reload (Run), and answers `check` by loading
// the registry as the worker would and printing every diagnostic (Check). Everything a team
// writes against is here, in package registry and in package client: no internal/ type is
// reachable from this package's API (a test walks it).
//
// The name: "worker" alone would collide with go.temporal.io/sdk/worker in the same file, and
// "workers" is Airlock's own wiring package, which takes internal types. airlockworker says
// what the package gives a stranger: an Airlock worker, theirs.
package airlockworker
