package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/airlock-dev/airlock/internal/clients"
	"github.com/airlock-dev/airlock/internal/inference"
	"github.com/airlock-dev/airlock/registry"

	"github.com/spf13/cobra"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/operatorservice/v1"
	taskqueuepb "go.temporal.io/api/taskqueue/v1"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"

	"github.com/airlock-dev/airlock/internal/approvers"
	"github.com/airlock-dev/airlock/internal/config"
	"github.com/airlock-dev/airlock/internal/passkey"
	"github.com/airlock-dev/airlock/internal/redact"
	"github.com/airlock-dev/airlock/internal/store"
	"github.com/airlock-dev/airlock/internal/token"
	"github.com/airlock-dev/airlock/workers"
	"github.com/airlock-dev/airlock/workflows"
)

// doctorCheck is one line of `airlock doctor`: what was checked, what was found, and when it
// failed, what to do.
type doctorCheck struct {
	Name   string
	OK     bool
	Warn   bool // passed, with a caveat
	Detail string
	Fix    string
}

// doctorTimeout bounds each network check.
const doctorTimeout = 5 * time.Second

// pollerFresh is how recently a poller must have polled to count as a live worker.
const pollerFresh = workers.PollerFreshness

func newDoctorCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "doctor",
		Short: "Check every connection and file Airlock needs and say what is wrong and what to do",
		Long: `Check, with the configuration the worker would use (environment, Temporal envconfig
profiles, flags):
  temporal   the frontend answers, the namespace exists, Airlock's search attributes are
             registered, and a worker polls the task queue
  store      the store answers and has Airlock's schema (it is never created here)
  approvers  the approvers file exists, parses and lists at least one approver; not readable
             by others
  model      which provider, API and model a worker serves (AIRLOCK_PROVIDER and its settings)
  key        the approver key exists, is a key, and is not readable by others
  registry   the capability registry and its layers load (the worker refuses to start otherwise)
  mcp NAME   each MCP server the registry names answers, and each pinned tool's live
             definition still has its pinned digest (a changed tool is not offered)
Secrets are read from files and the environment only, and never printed. Exit status 1 when a
check fails.`,
		Example: "  airlock doctor\n  TEMPORAL_ADDRESS=temporal.example:7233 TEMPORAL_API_KEY=… airlock doctor",
		RunE: func(cmd *cobra.Command, _ []string) error {
			checks := runDoctor(cmd.Context())
			if printDoctor(cmd.OutOrStdout(), checks) > 0 {
				return errors.New("doctor: some checks failed (see above)")
			}
			return nil
		},
	}
}

// runDoctor runs every check with the process's configuration (cfg).
func runDoctor(ctx context.Context) []doctorCheck {
	var out []doctorCheck
	out = append(out, doctorTemporal(ctx)...)
	out = append(out, doctorStore(ctx), doctorModel(), doctorApprovers(), doctorClients(), doctorKey(), doctorSecrets(), doctorRegistry(), doctorEligibility(), doctorPasskeys(ctx))
	out = append(out, doctorMCP(ctx)...)    // the MCP servers the registry just bound (cmd/airlock/mcp.go)
	out = append(out, doctorNotify(ctx)...) // approver notices (cmd/airlock/doctor_notify.go)
	return out
}

// printDoctor writes one line per check (and its fix) and returns the number that failed.
func printDoctor(w io.Writer, checks []doctorCheck) int {
	failed := 0
	for _, c := range checks {
		mark := "ok  "
		switch {
		case !c.OK:
			mark, failed = "FAIL", failed+1
		case c.Warn:
			mark = "warn"
		}
		fmt.Fprintf(w, "%s  %-10s %s\n", mark, c.Name, c.Detail)
		if c.Fix != "" && (!c.OK || c.Warn) {
			fmt.Fprintf(w, "      %-10s → %s\n", "", c.Fix)
		}
	}
	return failed
}

// scrub removes every secret Airlock may hold from an error's text before it is shown.
func scrub(err error) string {
	s := err.Error()
	for _, v := range []string{"TEMPORAL_API_KEY", "AIRLOCK_APPROVER_KEY", "AIRLOCK_OPENAI_API_KEY"} {
		s = redact.String(s, os.Getenv(v))
	}
	return redact.String(s, redact.URLSecrets(cfg.StoreURL())...)
}

func doctorTemporal(ctx context.Context) []doctorCheck {
	o, err := config.TemporalOptions()
	if err != nil {
		return []doctorCheck{{Name: "temporal", Detail: scrub(err),
			Fix: "check TEMPORAL_ADDRESS, TEMPORAL_NAMESPACE, TEMPORAL_API_KEY, the TLS settings and the envconfig profile (TEMPORAL_PROFILE, TEMPORAL_CONFIG_FILE)"}}
	}
	where := fmt.Sprintf("%s namespace %s", o.HostPort, o.Namespace)
	if o.ConnectionOptions.TLS != nil {
		where += " (TLS)"
	}
	ctx, cancel := context.WithTimeout(ctx, doctorTimeout)
	defer cancel()
	c, err := client.DialContext(ctx, o)
	if err != nil {
		return []doctorCheck{{Name: "temporal", Detail: where + ": " + scrub(err),
			Fix: "start it (make run: dev server; make cluster: the cluster) or set TEMPORAL_ADDRESS; for TLS/mTLS and API keys see TEMPORAL_TLS_*, TEMPORAL_API_KEY"}}
	}
	defer c.Close()
	if _, err := c.CheckHealth(ctx, &client.CheckHealthRequest{}); err != nil {
		return []doctorCheck{{Name: "temporal", Detail: where + ": health: " + scrub(err), Fix: "the frontend answers but is not healthy: read its log"}}
	}
	out := []doctorCheck{}
	if _, err := c.WorkflowService().DescribeNamespace(ctx, &workflowservice.DescribeNamespaceRequest{Namespace: o.Namespace}); err != nil {
		return append(out, doctorCheck{Name: "temporal", Detail: where + ": " + scrub(err),
			Fix: "create the namespace and search attributes: airlock cluster init (or set TEMPORAL_NAMESPACE)"})
	}
	out = append(out, doctorCheck{Name: "temporal", OK: true, Detail: where + " answers"})

	sa := doctorCheck{Name: "attrs", OK: true, Detail: "search attributes registered"}
	resp, err := c.OperatorService().ListSearchAttributes(ctx, &operatorservice.ListSearchAttributesRequest{Namespace: o.Namespace})
	if err != nil {
		sa = doctorCheck{Name: "attrs", OK: true, Warn: true, Detail: "cannot list search attributes: " + scrub(err), Fix: "the API key may lack operator rights; check with an administrator"}
	} else {
		var missing []string
		for name := range workflows.SearchAttributes() {
			if _, ok := resp.GetCustomAttributes()[name]; !ok {
				missing = append(missing, name)
			}
		}
		if len(missing) > 0 {
			sa = doctorCheck{Name: "attrs", Detail: "missing search attributes " + strings.Join(slices.Sorted(slices.Values(missing)), ", "),
				Fix: "airlock cluster init (registers them; idempotent)"}
		}
	}
	out = append(out, sa)

	q := doctorCheck{Name: "workers", OK: true}
	tq, err := c.WorkflowService().DescribeTaskQueue(ctx, &workflowservice.DescribeTaskQueueRequest{
		Namespace: o.Namespace, TaskQueue: &taskqueuepb.TaskQueue{Name: cfg.TaskQueue, Kind: enumspb.TASK_QUEUE_KIND_NORMAL},
		TaskQueueType: enumspb.TASK_QUEUE_TYPE_WORKFLOW,
	})
	// Temporal lists a poller for minutes after its worker stopped: only pollers seen within
	// a long poll (60 s) and some slack count as live.
	live := 0
	for _, p := range tq.GetPollers() {
		if t := p.GetLastAccessTime(); t != nil && time.Since(t.AsTime()) < pollerFresh {
			live++
		}
	}
	switch {
	case err != nil:
		q.Warn, q.Detail = true, "cannot describe task queue "+cfg.TaskQueue+": "+scrub(err)
	case live == 0:
		q.Warn, q.Detail = true, fmt.Sprintf("no worker polled task queue %s in the last %s", cfg.TaskQueue, pollerFresh)
		q.Fix = "start one: airlock worker (same TEMPORAL_* and AIRLOCK_TASK_QUEUE); turns wait until one polls"
	default:
		q.Detail = fmt.Sprintf("%d poller(s) on task queue %s seen in the last %s (a worker that stopped just now may still count)", live, cfg.TaskQueue, pollerFresh)
	}
	return append(append(out, q), doctorVersions(ctx, c, o.Namespace))
}

// doctorVersions is the deploy diagnosis (workers.DiagnoseVersioning): the current version, or
// a version turns are pinned to, without a worker fails, with what to run.
func doctorVersions(ctx context.Context, c client.Client, namespace string) doctorCheck {
	v, err := workers.VersioningFromEnv(cfg.TaskQueue)
	if err != nil {
		return doctorCheck{Name: "versions", Detail: err.Error(), Fix: "fix AIRLOCK_DEPLOYMENT, AIRLOCK_BUILD_ID, AIRLOCK_PROMOTE or AIRLOCK_WORKER_VERSIONING"}
	}
	if v.Off {
		return doctorCheck{Name: "versions", OK: true, Detail: "Worker Versioning is off (AIRLOCK_WORKER_VERSIONING=off)"}
	}
	d, err := workers.DiagnoseVersioning(ctx, c, namespace, v.Deployment, cfg.TaskQueue, time.Now())
	switch {
	case errors.Is(err, workers.ErrNoDeployment):
		return doctorCheck{Name: "versions", OK: true, Warn: true, Detail: "worker deployment " + v.Deployment + " does not exist yet", Fix: "start a worker: airlock worker"}
	case err != nil:
		return doctorCheck{Name: "versions", OK: true, Warn: true, Detail: "cannot diagnose worker deployment " + v.Deployment + ": " + scrub(err)}
	case len(d.Problems) > 0:
		var what, fix []string
		for _, p := range d.Problems {
			what, fix = append(what, p.What), append(fix, p.Fix)
		}
		return doctorCheck{Name: "versions", Detail: strings.Join(what, "; "), Fix: strings.Join(fix, "; ") + " (airlock deploy status shows every build)"}
	}
	return doctorCheck{Name: "versions", OK: true, Detail: fmt.Sprintf("deployment %s: current build %s has a worker; no pinned turn waits for a stopped build", v.Deployment, d.Current)}
}

func doctorStore(ctx context.Context) doctorCheck {
	ctx, cancel := context.WithTimeout(ctx, doctorTimeout)
	defer cancel()
	where := redact.URL(cfg.StoreURL())
	st, err := store.OpenExisting(ctx, cfg.StoreURL())
	if err != nil {
		fix := "check AIRLOCK_DATABASE_URL (host, port, user, sslmode; the password from the environment or a secrets file) and that PostgreSQL answers"
		if errors.Is(err, store.ErrNoStore) {
			fix = "start a worker once (it creates the store's schema), or point AIRLOCK_DATABASE_URL at the right database"
		}
		return doctorCheck{Name: "store", Detail: where + ": " + scrub(err), Fix: fix}
	}
	defer st.Close()
	if err := st.Ping(ctx); err != nil {
		return doctorCheck{Name: "store", Detail: where + ": " + scrub(err), Fix: "the store does not answer: check the database server"}
	}
	return doctorCheck{Name: "store", OK: true, Detail: fmt.Sprintf("%s (%s) answers", where, st.Driver())}
}

// doctorModel shows which provider, API and model a worker started with this environment
// serves (workers.LiveProvider); a configuration the worker would refuse fails.
func doctorModel() doctorCheck {
	p, err := workers.LiveProvider()
	if err != nil {
		return doctorCheck{Name: "model", Detail: scrub(err), Fix: "see airlock --help (AIRLOCK_PROVIDER and the provider's settings)"}
	}
	c := doctorCheck{Name: "model", OK: true, Detail: workers.DescribeProvider(p)}
	if p == nil {
		c.Warn, c.Fix = true, "turns can only replay recorded sessions: set AIRLOCK_PROVIDER (see airlock --help)"
	}
	if svc, ok := inference.ServiceNamed(os.Getenv("AIRLOCK_PROVIDER")); ok && svc.Hosted() && strings.HasSuffix(c.Detail, ", no key") {
		c.Warn, c.Fix = true, "the provider's servers will refuse every request: set its key (airlock --help names the variables)"
	}
	return c
}

func doctorApprovers() doctorCheck {
	path := cfg.ApproversPath()
	set, err := approvers.Load(path)
	if err != nil {
		fix := "fix the file (airlock approvers --help) or set AIRLOCK_APPROVERS"
		if errors.Is(err, fs.ErrNotExist) {
			fix = "create it: airlock approvers add NAME (or set AIRLOCK_APPROVERS): without it every decision is refused approver_unauthenticated"
		}
		return doctorCheck{Name: "approvers", Detail: scrub(err), Fix: fix}
	}
	n := len(set.Names())
	if n == 0 {
		return doctorCheck{Name: "approvers", Detail: path + " lists no approver", Fix: "airlock approvers add NAME"}
	}
	c := doctorCheck{Name: "approvers", OK: true, Detail: fmt.Sprintf("%s: %d approver(s)", path, n)}
	if fi, err := os.Stat(path); err == nil && fi.Mode().Perm()&0o002 != 0 {
		c.Warn, c.Fix = true, "anyone can write "+path+" (and add an approver): chmod o-w "+path
	}
	return c
}

func doctorKey() doctorCheck {
	if os.Getenv("AIRLOCK_APPROVER_KEY") != "" {
		if _, err := token.ParseKey(os.Getenv("AIRLOCK_APPROVER_KEY")); err != nil {
			return doctorCheck{Name: "key", Detail: "AIRLOCK_APPROVER_KEY: " + scrub(err), Fix: "set it to 64 hex characters, or use AIRLOCK_APPROVER_KEY_FILE"}
		}
		return doctorCheck{Name: "key", OK: true, Detail: "approver key from AIRLOCK_APPROVER_KEY"}
	}
	path := cfg.KeyFile()
	if _, err := workers.ApproverKey(cfg); err != nil {
		fix := "the file must hold 64 hex characters (the worker writes one); restore it from the worker's AIRLOCK_HOME"
		if errors.Is(err, token.ErrNoKey) {
			fix = "start a worker once (it creates the key), or point AIRLOCK_APPROVER_KEY_FILE at the workers' key: approver surfaces need the same key"
		}
		return doctorCheck{Name: "key", Detail: scrub(err), Fix: fix}
	}
	c := doctorCheck{Name: "key", OK: true, Detail: path + " holds an approver key"}
	if fi, err := os.Stat(path); err == nil && fi.Mode().Perm()&0o077 != 0 {
		c.Warn, c.Fix = true, fmt.Sprintf("%s is mode %o: anyone who reads it opens confirmation tokens; chmod 600 %s", path, fi.Mode().Perm(), path)
	}
	return c
}

// doctorRegistry loads the registry as a worker does. Entries of layer files that only a
// team's own worker binary binds (Go code, airlockworker) are checked under every other rule
// and counted: that binary binds them, and refuses to start when one is missing.
func doctorRegistry() doctorCheck {
	placeholders, err := goBoundPlaceholders(cfg.Layers)
	if err != nil {
		return doctorCheck{Name: "registry", Detail: scrub(err),
			Fix: "the worker refuses to start with this registry: fix AIRLOCK_REGISTRY_LAYERS (airlock registry check --help)"}
	}
	reg, err := workers.LoadRegistryWith(cfg, nil, nil, nil, placeholders)
	if err != nil {
		return doctorCheck{Name: "registry", Detail: scrub(err),
			Fix: "the worker refuses to start with this registry: fix AIRLOCK_REGISTRY / AIRLOCK_REGISTRY_LAYERS (airlock registry --help)"}
	}
	detail := fmt.Sprintf("%s: %d capabilities", reg.Revision(), len(reg.Capabilities()))
	if len(placeholders) > 0 {
		detail += fmt.Sprintf(" (%d bound by your own worker binary's Go code, not checked here: run its check)", len(placeholders))
	}
	return doctorCheck{Name: "registry", OK: true, Detail: detail}
}

// doctorClients checks the clients file workers authenticate turn requests against (issue 21):
// without it, or with a client-less one, every turn ends unattested.
func doctorClients() doctorCheck {
	path := cfg.ClientsPath()
	set, err := clients.Load(path)
	if err != nil {
		fix := "fix the file (airlock clients --help) or set AIRLOCK_CLIENTS"
		if errors.Is(err, fs.ErrNotExist) {
			fix = "register a client: airlock clients add NAME --principal P (or set AIRLOCK_CLIENTS): without it every turn ends unattested"
		}
		return doctorCheck{Name: "clients", Detail: scrub(err), Fix: fix}
	}
	if len(set.Names()) == 0 {
		return doctorCheck{Name: "clients", Detail: path + " lists no client: no turn can start", Fix: "airlock clients add NAME --principal P"}
	}
	return doctorCheck{Name: "clients", OK: true, Detail: fmt.Sprintf("%s: %d client(s)", path, len(set.Names()))}
}

// doctorEligibility flags every capability a human must confirm that too few approvers may
// decide (issue 21, item 2): its approval/groups have fewer members than its quorum, or, under
// the four-eyes rule, just as many (a requester among them leaves it undecidable for them).
func doctorEligibility() doctorCheck {
	reg, err := workers.LoadRegistry(cfg, nil, nil)
	if err != nil {
		return doctorCheck{Name: "deciders", OK: true, Warn: true, Detail: "not checked: the registry does not load (see registry)"}
	}
	set, err := approvers.Load(cfg.ApproversPath())
	if err != nil {
		return doctorCheck{Name: "deciders", OK: true, Warn: true, Detail: "not checked: the approvers file does not load (see approvers)"}
	}
	var none, thin []string
	for _, c := range reg.Capabilities() {
		pe, ok := reg.Policy().Entry(c.Key())
		if !ok || pe.Autonomy == registry.AutonomyDeny || (pe.Autonomy == registry.AutonomyAutomatic && c.Automatic()) {
			continue
		}
		n, need := len(set.EligibleNames(pe.ApproverGroups)), pe.Approvals()
		what := fmt.Sprintf("%s (%d eligible, needs %d)", c.Key(), n, need)
		switch {
		case n < need:
			none = append(none, what)
		case pe.DistinctApprover && n == need:
			thin = append(thin, what)
		}
	}
	switch {
	case len(none) > 0:
		return doctorCheck{Name: "deciders", Detail: "no quorum of approvers may decide " + strings.Join(none, ", "),
			Fix: "add approvers to the groups its policy names (airlock approvers add NAME --group G) or change approval/groups / approval/quorum"}
	case len(thin) > 0:
		return doctorCheck{Name: "deciders", OK: true, Warn: true, Detail: "just enough approvers for " + strings.Join(thin, ", ") + ": a requester among them cannot be replaced",
			Fix: "add another approver to its groups"}
	}
	return doctorCheck{Name: "deciders", OK: true, Detail: "every confirmed capability has enough eligible approvers"}
}

// doctorPasskeys flags every capability whose policy requires a passkey ("approval/passkey",
// issue 21 item 3) while fewer of the approvers eligible for it have registered one (in the
// store) than its quorum needs: no decision on it can count. It also checks the relying party
// settings every worker and page must share (AIRLOCK_PASSKEY_RP_ID, AIRLOCK_PASSKEY_ORIGINS).
func doctorPasskeys(ctx context.Context) doctorCheck {
	rp, err := passkey.FromEnv()
	if err != nil {
		return doctorCheck{Name: "passkeys", Detail: err.Error(), Fix: "set AIRLOCK_PASSKEY_RP_ID to the approver page's host name and AIRLOCK_PASSKEY_ORIGINS to its origins"}
	}
	reg, err := workers.LoadRegistry(cfg, nil, nil)
	if err != nil {
		return doctorCheck{Name: "passkeys", OK: true, Warn: true, Detail: "not checked: the registry does not load (see registry)"}
	}
	var need []registry.PolicyEntry
	for _, c := range reg.Capabilities() {
		if pe, ok := reg.Policy().Entry(c.Key()); ok && pe.Passkey && pe.Autonomy != registry.AutonomyDeny {
			need = append(need, pe)
		}
	}
	if len(need) == 0 {
		return doctorCheck{Name: "passkeys", OK: true, Detail: "no capability requires a passkey (relying party " + rp.RPID + ")"}
	}
	set, err := approvers.Load(cfg.ApproversPath())
	if err != nil {
		return doctorCheck{Name: "passkeys", OK: true, Warn: true, Detail: "not checked: the approvers file does not load (see approvers)"}
	}
	ctx, cancel := context.WithTimeout(ctx, doctorTimeout)
	defer cancel()
	st, err := store.OpenExisting(ctx, cfg.StoreURL())
	if err != nil {
		return doctorCheck{Name: "passkeys", OK: true, Warn: true, Detail: "not checked: the store does not open (see store)"}
	}
	defer st.Close()
	holders, err := st.PasskeyHolders(ctx)
	if err != nil {
		return doctorCheck{Name: "passkeys", OK: true, Warn: true, Detail: "not checked: " + scrub(err)}
	}
	var short []string
	for _, pe := range need {
		n := 0
		for _, name := range set.EligibleNames(pe.ApproverGroups) {
			if slices.Contains(holders, name) {
				n++
			}
		}
		if n < pe.Approvals() {
			short = append(short, fmt.Sprintf("%s (%d eligible approver(s) with a passkey, needs %d)", pe.Key(), n, pe.Approvals()))
		}
	}
	if len(short) > 0 {
		return doctorCheck{Name: "passkeys", Detail: "no decision can count on " + strings.Join(short, ", "),
			Fix: "an eligible approver signs in on the approver page (airlock web, opened at " + rp.RPID + ") and registers a passkey under Passkeys"}
	}
	return doctorCheck{Name: "passkeys", OK: true, Detail: fmt.Sprintf("%d capability(ies) require a passkey; each has enough eligible approvers with one (relying party %s)", len(need), rp.RPID)}
}

// doctorSecrets checks where the keys that decide for any approver live and who can read them
// (issues 21 and 33, item 4). The approver key (opens every confirmation's token) and the
// approver page's surface key (vouches for any approver) must be owner-only; and it FAILS when
// one reader of either key can also read a person's credential (left in the credentials folder
// by `airlock approvers add` / `airlock clients add`, or AIRLOCK_CREDENTIAL): that reader
// decides as that person, and with both keys as anyone. Keys belong in $AIRLOCK_HOME/keys or in
// files an operator mounts (AIRLOCK_APPROVER_KEY_FILE, AIRLOCK_SURFACE_KEY_FILE) for the
// worker's and page's own user; people's credentials with each person.
func doctorSecrets() doctorCheck {
	var warns []string
	keys := map[string]string{} // path -> what
	if os.Getenv("AIRLOCK_APPROVER_KEY") == "" {
		keys[cfg.KeyFile()] = "approver key"
	}
	surface := surfaceCredentialPath()
	keys[surface] = "surface key"
	for path, what := range keys {
		fi, err := os.Stat(path)
		if err != nil {
			delete(keys, path)
			continue
		}
		if what == "surface key" && fi.Mode().Perm()&0o077 != 0 {
			return doctorCheck{Name: "secrets", Detail: fmt.Sprintf("the approver page's surface key %s is mode %o: whoever reads it decides as any approver", path, fi.Mode().Perm()),
				Fix: "chmod 600 " + path}
		}
	}
	if surface == legacySurfacePath() {
		warns = append(warns, "the surface key "+surface+" sits beside people's credentials (move it to "+cfg.KeysDir("surface-web.json")+")")
	}
	if _, ok := keys[cfg.LegacyKeyFile()]; ok && cfg.ApproverKeyFile == "" {
		warns = append(warns, "the approver key "+cfg.LegacyKeyFile()+" sits at the top of AIRLOCK_HOME (move it to "+cfg.KeysDir("approver.key")+", mode 0700 folder)")
	}
	entries, _ := os.ReadDir(cfg.CredentialsDir())
	var people []string
	for _, e := range entries {
		if n := e.Name(); strings.HasSuffix(n, ".json") && n != "surface-web.json" {
			people = append(people, filepath.Join(cfg.CredentialsDir(), n))
		}
	}
	if p := os.Getenv("AIRLOCK_CREDENTIAL"); p != "" {
		if _, err := os.Stat(p); err == nil {
			people = append(people, p)
		}
	}
	var shared []string
	for path, what := range keys {
		for _, cred := range people {
			if who := commonReader(path, cred); who != "" {
				shared = append(shared, fmt.Sprintf("%s reads the %s %s and %s's credential %s", who, what, path, strings.TrimSuffix(filepath.Base(cred), ".json"), cred))
			}
		}
	}
	if len(shared) > 0 {
		slices.Sort(shared)
		return doctorCheck{Name: "secrets", Detail: "one reader holds a key that decides for any approver and people's credentials, so it decides as them: " + strings.Join(shared, "; "),
			Fix: "hand each credential to its person and delete it here (" + cfg.CredentialsDir() + "); run the worker and the page as their own user with the keys in " +
				filepath.Dir(cfg.KeysDir("x")) + " or mounted from a secret store (AIRLOCK_APPROVER_KEY_FILE, AIRLOCK_SURFACE_KEY_FILE)"}
	}
	if len(warns) > 0 {
		return doctorCheck{Name: "secrets", OK: true, Warn: true, Detail: strings.Join(warns, "; "),
			Fix: "keep the approver key and the surface key readable only by the worker and the page, and people's credentials only by each person"}
	}
	return doctorCheck{Name: "secrets", OK: true, Detail: "the keys are apart from people's credentials: no reader holds both"}
}

// commonReader names a reader of both files by their modes and owners ("user 1000", "group
// 100", "everyone"), or "" when none is evident (root, and a user reading one file as owner and
// the other through a group, are not told).
func commonReader(a, b string) string {
	ra, rb := readers(a), readers(b)
	if ra["everyone"] || rb["everyone"] {
		if len(ra) > 0 && len(rb) > 0 {
			return "everyone"
		}
	}
	for r := range ra {
		if rb[r] {
			return r
		}
	}
	return ""
}

// readers are who may read path by its mode bits: "user N" (owner), "group N", "everyone".
func readers(path string) map[string]bool {
	fi, err := os.Stat(path)
	if err != nil {
		return nil
	}
	out := map[string]bool{}
	perm := fi.Mode().Perm()
	uid, gid, ok := ownerOf(fi)
	if perm&0o400 != 0 && ok {
		out[fmt.Sprintf("user %d", uid)] = true
	}
	if perm&0o040 != 0 && ok {
		out[fmt.Sprintf("group %d", gid)] = true
	}
	if perm&0o004 != 0 {
		out["everyone"] = true
	}
	return out
}
