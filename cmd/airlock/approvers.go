package main

import (
	"bufio"
	"context"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/airlock-dev/airlock/internal/approvers"
	"github.com/airlock-dev/airlock/internal/display"
	"github.com/airlock-dev/airlock/internal/store"
)

func newApproversCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "approvers",
		Short: "Manage who may decide confirmations (the approvers file, passwords, CLI credentials)",
		Long: `The approvers file (AIRLOCK_APPROVERS, default $AIRLOCK_HOME/approvers.json, mode 0600) lists
every approver: a bcrypt hash of the password they sign in to the approver page with, and the
public key of the credential the CLI's approve and deny decide with. Workers authenticate every
decision against it, so an approver name is never a claim anybody can type: a decision carries
an ed25519 signature by the approver's own credential, or by the approver page that signed the
approver in. Changes take effect at once, without restarting workers.

Passkeys are not in this file: approvers register them on the approver page (Passkeys) and they
live in the store; a capability whose policy says "approval/passkey": true is decided only with
one (airlock approvers passkeys NAME lists or removes them).`,
	}
	cmd.AddCommand(newApproversAddCmd(), newApproversListCmd(), newApproversPasswdCmd(), newApproversRotateCmd(), newApproversRemoveCmd(), newApproversPasskeysCmd())
	return cmd
}

func newApproversAddCmd() *cobra.Command {
	var passwordStdin, noPassword bool
	var credOut string
	var groups []string
	cmd := &cobra.Command{
		Use:   "add NAME",
		Short: "Add an approver: a page password and a CLI credential (written owner-only)",
		Long: `Add an approver to the approvers file.

The approver page password is read from the first line of stdin with --password-stdin; otherwise
a random one is generated and printed once. The CLI credential (a private ed25519 key) is written
with mode 0600 to --credential-out (default $AIRLOCK_HOME/credentials/NAME.json): hand it to the
approver, who keeps it at ~/.config/airlock/credential.json or points AIRLOCK_CREDENTIAL at it.`,
		Example: "  airlock approvers add alice\n  printf '%s\\n' \"$PASSWORD\" | airlock approvers add bob --password-stdin",
		Args:    cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			name := args[0]
			if !approvers.NamePattern.MatchString(name) {
				return fmt.Errorf("approver name %q: use a letter, then letters, digits, '.', '_', '-' or '@' (64 at most)", name)
			}
			path := cfg.ApproversPath()
			if _, found, err := approvers.Find(path, name); err != nil {
				return err
			} else if found {
				return fmt.Errorf("%s already lists approver %q (airlock approvers passwd / rotate change an existing one)", path, name)
			}
			a := approvers.Approver{Name: name, Groups: groups}
			password := ""
			if !noPassword {
				var err error
				if password, err = readOrGeneratePassword(cmd.InOrStdin(), passwordStdin); err != nil {
					return err
				}
				if a.PasswordBcrypt, err = approvers.HashPassword(password); err != nil {
					return err
				}
			}
			if credOut == "" {
				credOut = filepath.Join(cfg.CredentialsDir(), name+".json")
			}
			cred, err := approvers.NewCredential("approver:" + name)
			if err != nil {
				return err
			}
			a.PublicKey = cred.Public()
			// A refused change writes nothing (issue 33, item 5): the file with the new
			// approver is validated before the credential is written, and the credential is
			// taken back if the file still refuses it.
			if err := approvers.CheckAdd(path, a); err != nil {
				if errors.Is(err, approvers.ErrExists) {
					return fmt.Errorf("%s already lists approver %q, in some case (airlock approvers passwd / rotate change an existing one): %w", path, name, err)
				}
				return err
			}
			if _, err := os.Lstat(credOut); err == nil {
				return fmt.Errorf("%s exists; choose another --credential-out or remove it: %w", credOut, fs.ErrExist)
			}
			undo, err := saveCredentialUndoably(credOut, cred)
			if err != nil {
				return err
			}
			if err := approvers.Add(path, a); err != nil {
				undo()
				return err
			}
			out := cmd.OutOrStdout()
			fmt.Fprintf(out, "added approver %s to %s\n", name, path)
			fmt.Fprintf(out, "CLI credential: %s (mode 0600; give it to %s: AIRLOCK_CREDENTIAL=%s)\n", credOut, name, credOut)
			if password != "" && !passwordStdin {
				fmt.Fprintf(out, "approver page password (shown once): %s\n", password)
			}
			return nil
		},
	}
	cmd.Flags().BoolVar(&passwordStdin, "password-stdin", false, "read the approver page password from the first line of stdin")
	cmd.Flags().BoolVar(&noPassword, "no-password", false, "no approver page sign-in (CLI credential only)")
	cmd.Flags().StringVar(&credOut, "credential-out", "", "where to write the CLI credential (default $AIRLOCK_HOME/credentials/NAME.json)")
	cmd.Flags().StringArrayVar(&groups, "group", nil, "an approver group the approver belongs to (repeatable): a policy's approval/groups lets only members decide its capability")
	return cmd
}

// saveCredentialUndoably writes cred to path (never replacing a file) and returns how to take
// it back: the file and any folders the write created are removed, so a change refused after
// the credential was written leaves nothing behind (issue 33, item 5).
func saveCredentialUndoably(path string, cred approvers.Credential) (func(), error) {
	var created []string
	for dir := filepath.Dir(path); ; dir = filepath.Dir(dir) {
		if _, err := os.Lstat(dir); err == nil || dir == filepath.Dir(dir) {
			break
		}
		created = append(created, dir)
	}
	if err := approvers.SaveCredential(path, cred); err != nil {
		for _, d := range created {
			_ = os.Remove(d) // only if empty
		}
		if errors.Is(err, fs.ErrExist) {
			return nil, fmt.Errorf("%s exists; choose another --credential-out or remove it: %w", path, err)
		}
		return nil, err
	}
	return func() {
		_ = os.Remove(path)
		for _, d := range created {
			_ = os.Remove(d)
		}
	}, nil
}

func readOrGeneratePassword(in io.Reader, fromStdin bool) (string, error) {
	if !fromStdin {
		b := make([]byte, 18)
		if _, err := rand.Read(b); err != nil {
			return "", err
		}
		return base64.RawURLEncoding.EncodeToString(b), nil
	}
	line, err := bufio.NewReader(in).ReadString('\n')
	if err != nil && !errors.Is(err, io.EOF) {
		return "", fmt.Errorf("read the password from stdin: %w", err)
	}
	line = strings.TrimRight(line, "\r\n")
	if line == "" {
		return "", errors.New("--password-stdin: stdin has no password on its first line")
	}
	return line, nil
}

func newApproversListCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "list",
		Short: "List approvers and how each may decide (page password, CLI credential)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			f, err := approvers.ReadFile(cfg.ApproversPath())
			if err != nil {
				return err
			}
			out := cmd.OutOrStdout()
			if len(f.Approvers) == 0 {
				fmt.Fprintf(out, "no approvers in %s (airlock approvers add NAME)\n", cfg.ApproversPath())
			}
			for _, a := range f.Approvers {
				line := fmt.Sprintf("%-24s page:%-4s cli:%-4s groups:%s", a.Name, yesNo(a.PasswordBcrypt != ""), yesNo(a.PublicKey != ""), strings.Join(a.Groups, ","))
				if len(a.Principals) > 0 {
					line += " principals:" + strings.Join(a.Principals, ",")
				}
				if a.Subject != "" {
					line += " oidc:" + display.Line(a.Subject)
				}
				if a.ValidUntil != nil {
					line += " (identity provider account, checked until " + a.ValidUntil.UTC().Format(time.RFC3339) + ")"
				}
				fmt.Fprintln(out, line)
			}
			for _, s := range f.Surfaces {
				fmt.Fprintf(out, "surface %s\n", s.Name)
			}
			return nil
		},
	}
}

func yesNo(b bool) string {
	if b {
		return "yes"
	}
	return "no"
}

func newApproversPasswdCmd() *cobra.Command {
	var passwordStdin bool
	cmd := &cobra.Command{
		Use:   "passwd NAME",
		Short: "Set an approver's page password (from stdin, or generated and printed once)",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			path := cfg.ApproversPath()
			a, err := findApprover(path, args[0])
			if err != nil {
				return err
			}
			password, err := readOrGeneratePassword(cmd.InOrStdin(), passwordStdin)
			if err != nil {
				return err
			}
			if a.PasswordBcrypt, err = approvers.HashPassword(password); err != nil {
				return err
			}
			if err := approvers.Update(path, a); err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "password of %s changed\n", a.Name)
			forgetInStore(cmd, a.Name, false)
			if !passwordStdin {
				fmt.Fprintf(cmd.OutOrStdout(), "approver page password (shown once): %s\n", password)
			}
			return nil
		},
	}
	cmd.Flags().BoolVar(&passwordStdin, "password-stdin", false, "read the password from the first line of stdin")
	return cmd
}

func newApproversRotateCmd() *cobra.Command {
	var credOut string
	cmd := &cobra.Command{
		Use:   "rotate NAME",
		Short: "Give an approver a new CLI credential; the old one stops working at once",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			path := cfg.ApproversPath()
			a, err := findApprover(path, args[0])
			if err != nil {
				return err
			}
			if credOut == "" {
				return errors.New("--credential-out is required: where to write the new credential (a new path; it is never overwritten)")
			}
			cred, err := approvers.NewCredential("approver:" + a.Name)
			if err != nil {
				return err
			}
			undo, err := saveCredentialUndoably(credOut, cred)
			if err != nil {
				return err
			}
			a.PublicKey = cred.Public()
			if err := approvers.Update(path, a); err != nil {
				undo()
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "new CLI credential for %s: %s (mode 0600); the old one no longer decides\n", a.Name, credOut)
			return nil
		},
	}
	cmd.Flags().StringVar(&credOut, "credential-out", "", "where to write the new credential (required)")
	return cmd
}

func newApproversRemoveCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "remove NAME",
		Short: "Remove an approver: their credential and page sessions stop deciding at once",
		Long: `Remove an approver from the approvers file. Workers re-read the file, so the approver's
CLI credential is refused (approver_unauthenticated) from the next decision on, and the approver
page signs them out at their next request. Their passkeys are removed from the store too (so an
approver added again under the name does not inherit them; when the store cannot be reached
this is said, and airlock approvers passkeys NAME --remove does it later). Their credential file
is left where it is: delete it.`,
		Example: "  airlock approvers remove bob",
		Args:    cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			path := cfg.ApproversPath()
			if _, found, err := approvers.Find(path, args[0]); err != nil {
				return err
			} else if !found {
				return fmt.Errorf("%s has no approver %q (airlock approvers list)", path, display.Visible(args[0]))
			}
			if err := approvers.Remove(path, args[0]); err != nil {
				return err
			}
			out := cmd.OutOrStdout()
			fmt.Fprintf(out, "removed approver %s from %s: their credential and page sessions no longer decide\n", args[0], path)
			forgetInStore(cmd, args[0], true)
			return nil
		},
	}
}

// forgetInStore ends every approver page session of name in the store (issue 21, item 4:
// page sessions live in the store, shared by every page instance) and, with passkeys, removes
// the approver's passkeys (an approver added again under the name inherits none), opening the
// store once. When the store cannot be reached it says so: the page still ends those sessions
// at their next request, because it checks the approvers file (membership and password stamp)
// on every request. A store that does not exist yet holds neither.
func forgetInStore(cmd *cobra.Command, name string, passkeys bool) {
	ctx, cancel := context.WithTimeout(cmd.Context(), 10*time.Second)
	defer cancel()
	out, who := cmd.OutOrStdout(), display.Visible(name)
	st, err := openExistingStore(ctx)
	if errors.Is(err, store.ErrNoStore) {
		return
	}
	if err == nil {
		defer st.Close()
	}
	var n int64
	if err == nil {
		n, err = st.DeleteApproverPageSessions(ctx, name)
	}
	if err != nil {
		fmt.Fprintf(cmd.ErrOrStderr(), "warning: could not end %s's page sessions in the store (%v); the page ends them at their next request\n", who, scrub(err))
	} else {
		fmt.Fprintf(out, "ended %d approver page session(s) of %s\n", n, who)
	}
	if !passkeys {
		return
	}
	if st == nil {
		fmt.Fprintf(out, "warning: %s's passkeys were not removed (%v): airlock approvers passkeys %s --remove ID, once the store answers\n", who, scrub(err), who)
		return
	}
	removed, err := removePasskeys(ctx, st, name)
	switch {
	case err != nil:
		fmt.Fprintf(out, "warning: %s's passkeys were not removed (%v): airlock approvers passkeys %s --remove ID, once the store answers\n", who, scrub(err), who)
	case removed > 0:
		fmt.Fprintf(out, "removed %d passkey(s) of %s\n", removed, who)
	}
}

// findApprover is the approver named name in the approvers file at path; an error that says
// how to add one when there is none.
func findApprover(path, name string) (approvers.Approver, error) {
	a, found, err := approvers.Find(path, name)
	if err != nil {
		return a, err
	}
	if !found {
		return a, fmt.Errorf("%s has no approver %q (airlock approvers add)", path, name)
	}
	return a, nil
}

// newApproversPasskeysCmd lists an approver's passkeys (issue 21, item 3) and lets an operator
// remove one, e.g. a lost authenticator's, when the approver cannot sign in to do it.
func newApproversPasskeysCmd() *cobra.Command {
	var remove string
	cmd := &cobra.Command{
		Use:   "passkeys NAME",
		Short: "List an approver's passkeys (registered on the approver page), or remove one",
		Long: `List the passkeys NAME registered on the approver page (Passkeys), from the store: the
credential id, name, authenticator model (AAGUID), when it was registered and last used, and its
signature counter. A capability whose policy says "approval/passkey": true is decided only with
one of them. --remove ID removes one at once: it decides nothing from the next decision on, and
the same authenticator cannot register it again (a new passkey can be registered).`,
		Example: "  airlock approvers passkeys alice\n  airlock approvers passkeys alice --remove TcHLEOZfE17nav6b…",
		Args:    cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			st, err := openExistingStore(cmd.Context())
			if err != nil {
				return err
			}
			defer st.Close()
			out := cmd.OutOrStdout()
			if remove != "" {
				if err := st.RemovePasskey(cmd.Context(), args[0], remove, time.Now()); err != nil {
					return fmt.Errorf("remove passkey: %w (airlock approvers passkeys %s lists them)", err, display.Visible(args[0]))
				}
				fmt.Fprintf(out, "removed passkey %s of %s: it decides nothing from now on\n", display.Visible(remove), display.Visible(args[0]))
				return nil
			}
			pks, err := st.ListPasskeys(cmd.Context(), args[0])
			if err != nil {
				return err
			}
			if len(pks) == 0 {
				fmt.Fprintf(out, "%s has no passkey (register one on the approver page, under Passkeys)\n", display.Visible(args[0]))
			}
			for _, p := range pks {
				used := "never used"
				if p.LastUsedAt != nil {
					used = "last used " + p.LastUsedAt.UTC().Format(time.RFC3339)
				}
				fmt.Fprintf(out, "%s  %q  aaguid:%s  registered %s  %s  counter %d\n", p.CredentialID, display.Line(p.Name),
					orNone(p.AAGUID), p.CreatedAt.UTC().Format(time.RFC3339), used, p.SignCount)
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&remove, "remove", "", "remove the passkey with this credential id")
	return cmd
}

// removePasskeys removes every live passkey of approver from st and returns how many.
func removePasskeys(ctx context.Context, st *store.Store, approver string) (int, error) {
	pks, err := st.ListPasskeys(ctx, approver)
	if err != nil {
		return 0, err
	}
	for _, p := range pks {
		if err := st.RemovePasskey(ctx, approver, p.CredentialID, time.Now()); err != nil {
			return 0, err
		}
	}
	return len(pks), nil
}
