// Command ticketworker is an Airlock turn worker with a platform team's own capabilities: it
// reads tickets of the team's ticket system automatically and opens new ones only once a human
// other than the requester approved (issue 19, item 1). It lives in a module of its own and
// imports nothing of Airlock's but its public packages: airlockworker to run the worker,
// registry to declare the capabilities.
//
//	TICKETS_URL=https://tickets.internal.example \
//	AIRLOCK_REGISTRY_LAYERS=./registry/tickets.v1.json \
//	ticketworker            # or: ticketworker check
//
// The layer file declares the capabilities (side effect, network, destination, caps) and its
// policy sidecar (tickets.v1.policy.json beside it) who may call them and how they are
// confirmed: the registry decides, this code only does the work.
package main

import (
	"fmt"
	"os"

	"github.com/airlock-dev/airlock/airlockworker"
)

func main() {
	base := os.Getenv("TICKETS_URL")
	if base == "" {
		fmt.Fprintln(os.Stderr, "ticketworker: set TICKETS_URL to the ticket system's base URL (e.g. https://tickets.internal.example)")
		os.Exit(2)
	}
	t := &Tickets{BaseURL: base, Token: os.Getenv("TICKETS_TOKEN")}
	airlockworker.Main(t.Get(), t.Create())
}
