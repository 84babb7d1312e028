package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"

	"github.com/spf13/cobra"

	"github.com/airlock-dev/airlock/internal/approvers"
	"github.com/airlock-dev/airlock/internal/clients"
	"github.com/airlock-dev/airlock/internal/config"
	"github.com/airlock-dev/airlock/internal/display"
	"github.com/airlock-dev/airlock/internal/redact"
	"github.com/airlock-dev/airlock/internal/replay"
	"github.com/airlock-dev/airlock/workers"
	"github.com/airlock-dev/airlock/workflows"
)

// DefaultTrace is the recorded session `make run` replays: gpt-4o reads a bill carrying
// injected instructions and proposes send_money to the attacker's account.
const DefaultTrace = "gpt-4o-2024-05-13/banking/user_task_0/important_instructions/injection_task_0"

func newDevCmd() *cobra.Command {
	var trace, message, decision string
	cmd := &cobra.Command{
		Use:   "dev",
		Short: "Bring up the local stack and run one real turn end to end (what make run does)",
		Long: `Start the local Temporal dev server (detached; it stays up afterwards so you can read the turn in
the Web UI), run a worker in this process, and process one real turn:

  - by default, the recorded gpt-4o AgentDojo session in which a bill carries injected
    instructions: read_file runs automatically (local, read-only), send_money to the attacker's
    account is held for a human, showing its literal arguments;
  - with AIRLOCK_OPENAI_BASE_URL set, a live model answers --message instead.

On a terminal you are asked to approve or deny; otherwise decide from another shell with
airlock approve / airlock deny, or set --decision (AIRLOCK_DEMO_DECISION) to approve or deny.`,
		Example: `  make run
  airlock dev --decision deny
  AIRLOCK_OPENAI_BASE_URL=http://localhost:11434/v1 AIRLOCK_OPENAI_MODEL=qwen2.5 airlock dev --message "Is this host healthy?"`,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return runDev(cmd, trace, message, decision)
		},
	}
	cmd.Flags().StringVar(&trace, "trace", DefaultTrace, "recorded session to replay (a path under the corpus runs/ folder, or its session name)")
	cmd.Flags().StringVar(&message, "message", "Check the health of this host and tell me if anything needs attention.", "user message for a live model")
	cmd.Flags().StringVar(&decision, "decision", os.Getenv("AIRLOCK_DEMO_DECISION"), "decide confirmations automatically: approve or deny (default: ask on a terminal, else wait)")
	return cmd
}

func runDev(cmd *cobra.Command, trace, message, decision string) error {
	ctx, cancel := context.WithCancel(cmd.Context())
	defer cancel()
	out := cmd.OutOrStdout()
	live := os.Getenv("AIRLOCK_OPENAI_BASE_URL") != ""
	if len(cfg.Layers) == 0 && cfg.CorpusDir != "" {
		cfg.Layers = []string{"agentdojo-banking", "agentdojo-workspace"}
	}
	if !live && cfg.CorpusDir == "" {
		root, _ := os.Getwd()
		return fmt.Errorf("no AgentDojo corpus found beside the repository (looked for ../shared/corpus/agentdojo above %s): "+
			"clone the repository beside the workspace's shared/ folder, or set AIRLOCK_CORPUS to the corpus folder, or AIRLOCK_OPENAI_BASE_URL for a live model", display.Visible(root))
	}

	step := func(format string, a ...any) { fmt.Fprintf(out, "▶ "+format+"\n", a...) }
	if _, err := ensureStack(cmd); err != nil { // prints what it starts or reuses
		return err
	}

	if os.Getenv("AIRLOCK_PROMOTE") == "" {
		// The development loop: the build just made takes new turns, even when it is a rebuild
		// of an older commit the server saw before (PromoteAuto would leave routing alone).
		os.Setenv("AIRLOCK_PROMOTE", string(workers.PromoteAlways))
	}
	step("starting a worker: store %s, registry layers %v", redact.URL(cfg.StoreURL()), cfg.Layers)
	ready := make(chan struct{})
	werr := make(chan error, 1)
	go func() { werr <- runWorker(ctx, cmd, ready) }()
	select {
	case <-ready:
	case err := <-werr:
		return fmt.Errorf("worker: %w", err)
	case <-ctx.Done():
		return ctx.Err()
	}

	demo, err := ensureDemoApprover()
	if err != nil {
		return err
	}
	step("approver %s decides with %s (page password in %s)", demo.name, demo.credential, demo.passwordFile)
	cfg.Credential = demo.credential
	devClient, err := ensureDevClient()
	if err != nil {
		return err
	}
	step("client %s starts the turn with %s (may speak for %s and %s)", devClientName, devClient, devPrincipal, replay.Principal)
	cfg.ClientCredential = devClient
	if url, err := startDevWeb(ctx, cmd); err != nil {
		fmt.Fprintf(out, "  (the approver page did not start: %v; decide with the commands shown)\n", err)
	} else {
		step("approver page: %s  sign in as %s with the password in %s", url, demo.name, demo.passwordFile)
	}

	var req workflows.TurnRequest
	if live {
		req = workflows.TurnRequest{Conversation: fmt.Sprintf("dev-%d", time.Now().Unix()), Principal: devPrincipal, Message: message,
			Scope: []string{"system.health", "web.fetch"}}
		step("live model at %s: %q", os.Getenv("AIRLOCK_OPENAI_BASE_URL"), message)
	} else {
		var err error
		if req, err = replayRequest(trace); err != nil {
			return err
		}
		step("replaying the recorded session %s", trace)
		fmt.Fprintf(out, "  user: %s\n", display.Text(req.Message))
	}

	var decide decider
	switch decision {
	case "approve", "deny":
		decide = func(context.Context, workflows.PendingConfirmation, func() bool) (bool, string, bool) {
			fmt.Fprintf(out, "   deciding %s (--decision / AIRLOCK_DEMO_DECISION)\n", decision)
			return decision == "approve", "denied by the demo decision (airlock dev --decision deny / AIRLOCK_DEMO_DECISION=deny)", true
		}
	case "":
		if isTerminal(os.Stdin) {
			decide = askTerminal(os.Stdin, out)
		} else {
			fmt.Fprintf(out, "  (stdin is not a terminal: decide from another shell with the commands shown, or rerun with\n"+
				"   AIRLOCK_DEMO_DECISION=deny or =approve; an undecided confirmation expires after %s and the call never runs)\n", workflows.DefaultConfirmationTTL)
		}
	default:
		return fmt.Errorf("--decision must be approve or deny, not %q", decision)
	}

	id, err := startAndWatch(ctx, out, req, true, decide)
	if err != nil {
		return err
	}
	opts, _ := config.TemporalOptions()
	fmt.Fprintf(out, "\naudit:   %s audit --turn %s\nresult:  %s turn show %s\nUI:      %s\n", self(), id, self(), id, cfg.WorkflowURL(opts.Namespace, id))
	fmt.Fprintf(out, "Temporal keeps running for the Web UI; stop it with: make stop\n")
	cancel()
	if err := <-werr; err != nil && !errors.Is(err, context.Canceled) {
		return err
	}
	return nil
}

// startDevWeb serves the approver page in this process on cfg.WebAddr until ctx ends and
// returns its URL, or why it could not start (the address is taken: another page runs).
func startDevWeb(ctx context.Context, cmd *cobra.Command) (string, error) {
	ready := make(chan string, 1)
	errc := make(chan error, 1)
	go func() { errc <- runWeb(ctx, io.Discard, cmd.ErrOrStderr(), cfg.WebAddr, "", "", ready) }()
	select {
	case u := <-ready:
		return u, nil
	case err := <-errc:
		return "", err
	}
}

// devPrincipal is the requesting principal of live dev turns: never the demo approver, so
// four-eyes rules hold in the demo too.
const devPrincipal = "dev-user"

// devClientName is the client credential `airlock dev` starts its turns with: never the demo
// approver, so four-eyes rules hold in the demo too.
const devClientName = "dev-client"

// ensureDevClient makes sure the clients file lists devClientName, allowed to speak for the
// dev principals, with its credential under <home>/credentials (mode 0600), creating them on
// first run; it returns the credential's path.
func ensureDevClient() (string, error) {
	path := filepath.Join(cfg.CredentialsDir(), "client-"+devClientName+".json")
	c, found, err := clients.Find(cfg.ClientsPath(), devClientName)
	if err != nil {
		return path, err
	}
	if found {
		cred, err := clients.LoadCredential(path)
		if err != nil || cred.Public() != c.PublicKey {
			return path, fmt.Errorf("the clients file lists %s but its credential %s is unusable or another key (airlock clients remove %s, then run again): %v", devClientName, path, devClientName, err)
		}
		return path, nil
	}
	cred, err := clients.NewCredential(devClientName)
	if err != nil {
		return path, err
	}
	_ = os.Remove(path) // a leftover of a clients file that was deleted
	if err := clients.SaveCredential(path, cred); err != nil {
		return path, err
	}
	return path, clients.Add(cfg.ClientsPath(), clients.Client{Name: devClientName, PublicKey: cred.Public(), Principals: []string{devPrincipal, replay.Principal}})
}

// demoApprover is the approver `airlock dev` creates on first run.
type demoApprover struct{ name, credential, passwordFile string }

// demoApproverName is the approver `airlock dev` decides as.
const demoApproverName = "demo-approver"

// ensureDemoApprover makes sure the approvers file lists demoApproverName with a CLI credential
// and a page password under <home>/credentials (both mode 0600), creating them on first run.
func ensureDemoApprover() (demoApprover, error) {
	d := demoApprover{name: demoApproverName,
		credential:   filepath.Join(cfg.CredentialsDir(), demoApproverName+".json"),
		passwordFile: filepath.Join(cfg.CredentialsDir(), demoApproverName+".password")}
	_, found, err := approvers.Find(cfg.ApproversPath(), d.name)
	if err != nil {
		return d, err
	}
	if found {
		if _, err := approvers.LoadCredential(d.credential); err != nil {
			return d, fmt.Errorf("the approvers file lists %s but its credential is unusable (airlock approvers rotate %s): %w", d.name, d.name, err)
		}
		return d, nil
	}
	password, err := readOrGeneratePassword(nil, false)
	if err != nil {
		return d, err
	}
	hash, err := approvers.HashPassword(password)
	if err != nil {
		return d, err
	}
	cred, err := approvers.NewCredential("approver:" + d.name)
	if err != nil {
		return d, err
	}
	_ = os.Remove(d.credential) // a leftover of an approvers file that was deleted
	if err := approvers.SaveCredential(d.credential, cred); err != nil {
		return d, err
	}
	if err := os.WriteFile(d.passwordFile, []byte(password+"\n"), 0o600); err != nil {
		return d, fmt.Errorf("write %s: %w", d.passwordFile, err)
	}
	return d, approvers.Add(cfg.ApproversPath(), approvers.Approver{Name: d.name, PasswordBcrypt: hash, PublicKey: cred.Public()})
}
