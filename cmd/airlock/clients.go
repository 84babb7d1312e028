package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/airlock-dev/airlock/internal/clients"
	"github.com/airlock-dev/airlock/internal/display"
	"github.com/airlock-dev/airlock/workflows"
)

func newClientsCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "clients",
		Short: "Manage who may start turns, and for which principals (the clients file, client credentials)",
		Long: `The clients file (AIRLOCK_CLIENTS, default $AIRLOCK_HOME/clients.json, mode 0600) lists every
credential that may start turns: its name, the public key of its private credential, and the
principals it may speak for, exact ("bob": a person's CLI) or a prefix ending in '*' ("user:*":
a chat backend that signs in its own users). Every turn request carries a signature by such a
credential over its conversation, turn number, principal, message and time; workers end a turn
whose request does not verify without calling the model (end reason "unattested"). Four-eyes
rules compare the approver with the proven principal and with the credential that started the
turn. Changes take effect at once, without restarting workers.`,
	}
	cmd.AddCommand(newClientsAddCmd(), newClientsListCmd(), newClientsRemoveCmd())
	return cmd
}

func newClientsAddCmd() *cobra.Command {
	var principals []string
	var credOut string
	var gateway bool
	cmd := &cobra.Command{
		Use:   "add NAME --principal P [--principal 'user:*'] [--gateway]",
		Short: "Register a client credential (written owner-only) and the principals it may start turns for",
		Long: `Register a client credential in the clients file. The private key is written with mode 0600
to --credential-out (default $AIRLOCK_HOME/credentials/client-NAME.json): hand it to the person
or service, who points AIRLOCK_CLIENT_CREDENTIAL at it (the CLI's default is
~/.config/airlock/client.json). Name a person's credential after the person: a four-eyes rule
then refuses their approval of any turn they started, whatever principal it speaks for.

--gateway registers the credential "airlock mcp serve" signs calls with over HTTP: it vouches
for each call whose bearer token it verified (within its --principal scopes, and only where the
token's own client may speak for the principal), so bearer tokens never enter Temporal history.
Point AIRLOCK_MCP_GATEWAY_CREDENTIAL at the file it writes.`,
		Example: "  airlock clients add bob --principal bob\n  airlock clients add chat-backend --principal 'user:*'\n  airlock clients add mcp-gateway --gateway --principal 'user:*' --principal bob",
		Args:    cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			name := args[0]
			if !clients.NamePattern.MatchString(name) {
				return fmt.Errorf("client name %q: use a letter, then letters, digits, '.', '_', '-' or '@' (64 at most)", display.Visible(name))
			}
			if len(principals) == 0 {
				return errors.New("--principal is required: the principals this credential may start turns for (a name, or a prefix ending in '*')")
			}
			path := cfg.ClientsPath()
			if _, found, err := clients.Find(path, name); err != nil {
				return err
			} else if found {
				return fmt.Errorf("%s already lists client %q (airlock clients remove it first)", path, name)
			}
			if credOut == "" {
				credOut = filepath.Join(cfg.CredentialsDir(), "client-"+name+".json")
			}
			cred, err := clients.NewCredential(name)
			if err != nil {
				return err
			}
			// Validate the registration before writing the private key.
			reg := clients.Client{Name: name, PublicKey: cred.Public(), Principals: principals, Gateway: gateway}
			if b, err := json.Marshal(clients.File{Clients: []clients.Client{reg}}); err != nil {
				return err
			} else if _, err := clients.Parse(b); err != nil {
				return err
			}
			if err := clients.SaveCredential(credOut, cred); err != nil {
				if errors.Is(err, fs.ErrExist) {
					return fmt.Errorf("%s exists; choose another --credential-out or remove it: %w", credOut, err)
				}
				return err
			}
			if err := clients.Add(path, reg); err != nil {
				os.Remove(credOut)
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "client %s may start turns for %s\n  credential: %s (mode 0600; AIRLOCK_CLIENT_CREDENTIAL)\n  clients file: %s\n",
				name, strings.Join(principals, ", "), credOut, path)
			return nil
		},
	}
	cmd.Flags().StringArrayVar(&principals, "principal", nil, "a principal this credential may start turns for, or a prefix ending in '*' (repeatable; required)")
	cmd.Flags().StringVar(&credOut, "credential-out", "", "where to write the private credential (default $AIRLOCK_HOME/credentials/client-NAME.json)")
	cmd.Flags().BoolVar(&gateway, "gateway", false, "register the credential airlock mcp serve signs HTTP callers' calls with (AIRLOCK_MCP_GATEWAY_CREDENTIAL)")
	return cmd
}

func newClientsListCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "list",
		Short: "List the registered client credentials and the principals each may start turns for",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			f, err := clients.ReadFile(cfg.ClientsPath())
			if err != nil {
				return err
			}
			if len(f.Clients) == 0 {
				fmt.Fprintf(cmd.OutOrStdout(), "no clients in %s (airlock clients add NAME --principal P): no turn can start\n", cfg.ClientsPath())
				return nil
			}
			for _, c := range f.Clients {
				kind := ""
				if c.Gateway {
					kind = "\tgateway (airlock mcp serve)"
				}
				fmt.Fprintf(cmd.OutOrStdout(), "%s\tprincipals: %s%s\n", c.Name, strings.Join(c.Principals, ", "), kind)
			}
			return nil
		},
	}
}

func newClientsRemoveCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "remove NAME",
		Short: "Remove a client credential: workers refuse the turns it starts from then on",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := clients.Remove(cfg.ClientsPath(), args[0]); err != nil {
				if errors.Is(err, clients.ErrNotFound) {
					return fmt.Errorf("%s has no client %q (airlock clients list)", cfg.ClientsPath(), display.Visible(args[0]))
				}
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "removed client %s\n", args[0])
			return nil
		},
	}
}

// signTurn attests req as turn seq with the CLI's client credential (AIRLOCK_CLIENT_CREDENTIAL).
func signTurn(req *workflows.TurnRequest, seq int) error {
	path := cfg.ClientCredentialPath()
	cred, err := clients.LoadCredential(path)
	if errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("no client credential at %s: workers only run turns a registered client attests; register one with `airlock clients add NAME --principal %s` and set AIRLOCK_CLIENT_CREDENTIAL to the file it writes", path, req.Principal)
	}
	if err != nil {
		return err
	}
	workflows.SignRequest(cred, req, seq, time.Now())
	return nil
}
