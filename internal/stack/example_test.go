package stack_test

import (
	"context"
	"fmt"
	"log"
	"os"
	"os/signal"

	"github.com/airlock-dev/airlock/internal/stack"
)

// The local stack: reuse the server on :7233 or start one with the Web UI on :8233, and stop
// it on Ctrl-C if this process started it.
func ExampleEnsureTemporal() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()

	opts := stack.DefaultTemporalOptions()
	opts.SearchAttributes = map[string]string{"AirlockStatus": "Keyword"}
	opts.Log = os.Stderr
	srv, err := stack.EnsureTemporal(ctx, opts)
	if err != nil {
		log.Fatal(err)
	}
	defer srv.Stop(context.Background())
	fmt.Println("Temporal at", srv.Address, "namespace", srv.Namespace, "UI", srv.UIAddress)
	<-ctx.Done()
}
