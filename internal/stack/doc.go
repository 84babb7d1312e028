// Package stack manages the local Temporal dev server behind the zero-setup local stack
// (`make run`) and the integration tests.
//
// EnsureTemporal reuses a server that already answers on the requested port, or starts
// `temporal server start-dev` from the CLI the Makefile builds (bin/temporal) with a SQLite
// state file in WAL mode and a raised transfer poll rate, waits until it answers, and makes
// sure the namespace and the requested search attributes exist. A server is started either as
// a child of this process (stopped by Temporal.Stop) or detached in its own session (pid file
// in the state directory, stopped by StopDetached).
//
// Process control uses Unix sessions and signals; the package targets Linux and macOS.
package stack
