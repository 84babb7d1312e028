package integration

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/jmoiron/sqlx"
	_ "github.com/lib/pq"
	"go.temporal.io/sdk/client"

	"github.com/airlock-dev/airlock/internal/approvers"
	"github.com/airlock-dev/airlock/internal/config"
	"github.com/airlock-dev/airlock/internal/stack"
	"github.com/airlock-dev/airlock/workflows"
)

var (
	devServer *stack.Temporal
	// itApprovers is the approvers file every worker of these tests authenticates decisions
	// against (AIRLOCK_APPROVERS, inherited by subprocesses); itCredentials are the
	// approvers' CLI credential files.
	itApprovers   string
	itCredentials = map[string]string{}
	pgURL         string
	airlockBin    string
	repoRoot      string
	corpusDir     string
)

func TestMain(m *testing.M) {
	if os.Getenv(chaosWorkerEnv) == "1" {
		// The chaos harness re-executes this binary as a worker it can SIGKILL (chaos_worker_test.go).
		os.Exit(chaosWorkerMain())
	}
	os.Exit(run(m))
}

func run(m *testing.M) int {
	fail := func(format string, a ...any) int {
		fmt.Fprintf(os.Stderr, "integration: "+format+"\n", a...)
		return 1
	}
	var err error
	if repoRoot, err = stack.RepoRoot(); err != nil {
		return fail("%v", err)
	}
	corpusDir = filepath.Join(repoRoot, "..", "shared", "corpus", "agentdojo")
	if _, err := os.Stat(filepath.Join(corpusDir, "tools.json")); err != nil {
		return fail("the AgentDojo corpus is missing at %s: %v", corpusDir, err)
	}
	pgURL = os.Getenv("AIRLOCK_TEST_DATABASE_URL")
	if pgURL == "" {
		return fail("AIRLOCK_TEST_DATABASE_URL is not set; run `make test`, or export AIRLOCK_TEST_DATABASE_URL=\"$(scripts/ensure-postgres.sh)\"")
	}
	tmp, err := os.MkdirTemp("", "airlock-integration-")
	if err != nil {
		return fail("%v", err)
	}
	defer os.RemoveAll(tmp)

	if err := writeApprovers(tmp, "alice", "bob", "carol", "mallory", "chaos-approver"); err != nil {
		return fail("approvers: %v", err)
	}
	if err := writeClients(tmp); err != nil {
		return fail("clients: %v", err)
	}

	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	airlockBin = filepath.Join(tmp, "airlock")
	build := exec.CommandContext(ctx, "go", "build", "-o", airlockBin, "./cmd/airlock")
	build.Dir = repoRoot
	if out, err := build.CombinedOutput(); err != nil {
		return fail("build airlock: %v\n%s", err, out)
	}
	// A dev server that exits while starting (seen twice in a row on this machine right after
	// a whole run: its ports are picked free, then bound a moment later) is started again in a
	// fresh directory on fresh ports, at most three times; each failure is printed whole.
	for attempt := 1; ; attempt++ {
		devServer, err = stack.EnsureTemporal(ctx, stack.TemporalOptions{
			Dir: filepath.Join(tmp, fmt.Sprintf("temporal-%d", attempt)), UIPort: 0, Namespace: "airlock-it", // the UI on a free port: the browser tests screenshot it
			SearchAttributes: workflows.SearchAttributes(), Log: os.Stderr,
			// Every test's worker runs as a Worker Deployment of its own (named after its task
			// queue), and the server refuses the 101st of a namespace (matching.maxDeployments):
			// a run of this package makes about that many, and go test -count=2 made every test
			// after the limit fail with "Worker Deployment not found".
			ExtraArgs: []string{"--dynamic-config-value", "matching.maxDeployments=100000"},
		})
		if err == nil || attempt == 3 || !errors.Is(err, stack.ErrStart) {
			break
		}
		fmt.Fprintf(os.Stderr, "integration: the Temporal dev server did not start (attempt %d of 3), starting another: %v\n", attempt, err)
	}
	if err != nil {
		return fail("start the Temporal dev server: %v", err)
	}
	defer devServer.Stop(context.Background())
	return m.Run()
}

// writeApprovers writes the approvers file and one CLI credential per name under dir, and
// exports AIRLOCK_APPROVERS so every worker (in-process or not) authenticates against it.
func writeApprovers(dir string, names ...string) error {
	itApprovers = filepath.Join(dir, "approvers.json")
	for _, n := range names {
		cred, err := approvers.NewCredential("approver:" + n)
		if err != nil {
			return err
		}
		path := filepath.Join(dir, "credentials", n+".json")
		if err := approvers.SaveCredential(path, cred); err != nil {
			return err
		}
		if err := approvers.Add(itApprovers, approvers.Approver{Name: n, PublicKey: cred.Public()}); err != nil {
			return err
		}
		itCredentials[n] = path
	}
	return os.Setenv("AIRLOCK_APPROVERS", itApprovers)
}

// signer is approver's credential; for a name the approvers file does not list, a fresh
// credential no worker knows (its decisions are refused approver_unauthenticated).
func signer(t testing.TB, approver string) approvers.Credential {
	t.Helper()
	c, err := credentialFor(approver)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// credentialFor is signer for code without a testing.TB (the chaos harness).
func credentialFor(approver string) (approvers.Credential, error) {
	if path, ok := itCredentials[approver]; ok {
		return approvers.LoadCredential(path)
	}
	return approvers.NewCredential("approver:" + approver)
}

// testApprovers is the Approvers source of in-process workers built without workers.Build.
// A chaos worker (this binary re-executed) finds the file through the AIRLOCK_APPROVERS it
// inherited.
func testApprovers() func() (*approvers.Set, error) {
	path := itApprovers
	if path == "" {
		path = os.Getenv("AIRLOCK_APPROVERS")
	}
	return approvers.NewSource(path).Current
}

// dial connects a client to the test server.
func dial(t testing.TB) client.Client {
	t.Helper()
	o := client.Options{HostPort: devServer.Address, Namespace: devServer.Namespace, Logger: quietLogger(),
		Interceptors: signing()}
	config.TuneForLoopback(&o)
	c, err := client.Dial(o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	return c
}

// freshDB returns a PostgreSQL URL whose search_path is a new, empty schema dropped after the
// test, so every test starts with an empty store.
func freshDB(t testing.TB) string {
	t.Helper()
	admin, err := sqlx.Open("postgres", pgURL)
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close()
	b := make([]byte, 6)
	rand.Read(b)
	schema := "it_" + hex.EncodeToString(b)
	if _, err := admin.Exec("CREATE SCHEMA " + schema); err != nil {
		t.Fatalf("create schema (is PostgreSQL up? scripts/ensure-postgres.sh): %v", err)
	}
	t.Cleanup(func() {
		a, err := sqlx.Open("postgres", pgURL)
		if err == nil {
			a.Exec("DROP SCHEMA " + schema + " CASCADE")
			a.Close()
		}
	})
	u, err := url.Parse(pgURL)
	if err != nil {
		t.Fatal(err)
	}
	q := u.Query()
	q.Set("search_path", schema)
	u.RawQuery = q.Encode()
	return u.String()
}

// taskQueue is a task queue unique to one test, so workers of different tests never share work.
func taskQueue(t testing.TB) string {
	b := make([]byte, 4)
	rand.Read(b)
	return "it-" + hex.EncodeToString(b)
}

// eventually polls cond every 100 ms until it holds or d passes.
func eventually(t *testing.T, d time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %s waiting for %s", d, what)
		}
		time.Sleep(100 * time.Millisecond)
	}
}
