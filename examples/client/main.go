// Command client is an example client app built only on Airlock's public client package: it
// starts a turn, shows every confirmation the turn waits for, lets you approve or deny it as
// the approver whose credential this machine holds, and prints the turn's result.
//
//	go run ./examples/client -conversation demo -message "fetch https://example.com and summarize it"
//
// It reads the same settings as the airlock CLI (client.OptionsFromEnv: AIRLOCK_HOME,
// AIRLOCK_DATABASE_URL, AIRLOCK_APPROVER_KEY_FILE, AIRLOCK_CREDENTIAL, AIRLOCK_TASK_QUEUE;
// TEMPORAL_ADDRESS, TEMPORAL_NAMESPACE). A worker must be running (make run, airlock worker).
package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"slices"
	"strings"
	"time"

	"github.com/airlock-dev/airlock/client"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "example client:", err)
		os.Exit(1)
	}
}

func run() error {
	conversation := flag.String("conversation", "example", "conversation id; turns of one conversation share context")
	message := flag.String("message", "", "the user's message (required)")
	session := flag.String("session", "", "a recorded session to replay instead of a live model")
	decide := flag.String("decide", "ask", "how to decide confirmations: ask (on the terminal), approve, deny")
	principal := flag.String("principal", os.Getenv("USER"), "who the turn acts for: the client credential (AIRLOCK_CLIENT_CREDENTIAL) must be registered for it")
	flag.Parse()
	if *message == "" {
		flag.Usage()
		return errors.New("-message is required")
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()

	c, err := client.Dial(ctx, client.OptionsFromEnv())
	if err != nil {
		return err
	}
	defer c.Close()
	turn, err := c.StartTurn(ctx, client.TurnRequest{Conversation: *conversation, Principal: *principal,
		Message: *message, Session: *session})
	if err != nil {
		return err
	}
	fmt.Println("started", turn.ID)

	results := make(chan client.TurnResult, 1)
	failed := make(chan error, 1)
	go func() {
		res, err := turn.Result(ctx)
		if err != nil {
			failed <- err
			return
		}
		results <- res
	}()
	stdin := bufio.NewReader(os.Stdin)
	asked := map[string]bool{}
	tick := time.NewTicker(300 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case res := <-results:
			printResult(res)
			return nil
		case err := <-failed:
			return err
		case <-ctx.Done():
			return ctx.Err()
		case <-tick.C:
		}
		pending, err := turn.Pending(ctx)
		if err != nil {
			continue // not answerable yet (no worker has run the turn) or just ended
		}
		for _, p := range pending {
			if asked[p.ConfirmationID] {
				continue
			}
			asked[p.ConfirmationID] = true
			req, ok := ask(stdin, p, *decide)
			if !ok {
				fmt.Println("  left undecided: decide it elsewhere (airlock approve/deny, the approver page)")
				continue
			}
			if err := c.Decide(ctx, req); err != nil {
				var de *client.DecisionError
				if errors.As(err, &de) {
					fmt.Printf("  not decided here: %s\n", client.Visible(de.Error()))
					continue
				}
				return err
			}
			fmt.Printf("  %s\n", pastTense(req.Decision))
		}
	}
}

// ask shows a pending confirmation (every model-written value through client.Visible) and
// returns the decision on it.
func ask(in *bufio.Reader, p client.PendingConfirmation, mode string) (client.DecideRequest, bool) {
	fmt.Printf("\nconfirmation needed %s: %s@%d (tool %s), expires %s\n", p.ConfirmationID, p.CapabilityID, p.Version,
		client.Visible(p.ToolName), p.ExpiresAt.Local().Format(time.TimeOnly))
	var args map[string]json.RawMessage
	if json.Unmarshal(p.Arguments, &args) == nil {
		keys := make([]string, 0, len(args))
		for k := range args {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		for _, k := range keys {
			fmt.Printf("  %s = %s\n", client.Visible(k), client.Visible(string(args[k])))
		}
	} else {
		fmt.Printf("  arguments: %s\n", client.Visible(string(p.Arguments)))
	}
	// ArgsDigest binds the decision to the arguments shown above.
	req := client.DecideRequest{ConfirmationID: p.ConfirmationID, ArgsDigest: p.ArgsDigest}
	switch mode {
	case "approve":
		req.Decision = client.Approve
		return req, true
	case "deny":
		req.Decision, req.Reason = client.Deny, "denied by the example client"
		return req, true
	}
	fmt.Print("approve? [y = approve, n = deny, anything else = leave it]: ")
	line, err := in.ReadString('\n')
	if err != nil {
		return req, false
	}
	switch strings.TrimSpace(strings.ToLower(line)) {
	case "y", "yes":
		req.Decision = client.Approve
	case "n", "no":
		fmt.Print("reason (the model is told): ")
		reason, _ := in.ReadString('\n')
		req.Decision, req.Reason = client.Deny, strings.TrimSpace(reason)
	default:
		return req, false
	}
	return req, true
}

func printResult(res client.TurnResult) {
	fmt.Printf("\n%s %s (%s) after %d round(s), %d+%d tokens\n", res.WorkflowID, res.Status, res.EndReason, res.Rounds,
		res.Usage.InputTokens, res.Usage.OutputTokens)
	for _, o := range res.Outcomes {
		line := fmt.Sprintf("  #%d %s: %s", o.Seq, client.Visible(o.Name), o.Outcome)
		if o.Reason != "" {
			line += " (" + client.Visible(o.Reason) + ")"
		}
		if o.Approver != "" {
			line += " decided by " + client.Visible(o.Approver)
		}
		fmt.Println(line)
	}
	for _, c := range res.Citations {
		fmt.Printf("  cited %s\n", client.Visible(c.FinalURL))
	}
	fmt.Println("assistant:", client.Text(res.Prose))
}

// pastTense is what the example prints after a decision counted.
func pastTense(decision string) string {
	switch decision {
	case client.Approve:
		return "approved"
	case client.Deny:
		return "denied"
	}
	return decision + " sent"
}
