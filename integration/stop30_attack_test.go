package integration

// Stop 30 attack (end to end): the PostgreSQL store now runs its statements prepared, runs a
// statement again as written after a server error, and flushes its cache when that second run
// succeeds. These tests drive whole turns through server errors injected by triggers (each
// fails a statement's first run(s), so the prepared run fails and the plain run succeeds),
// through pg_terminate_backend of every store connection while decisions and effects happen,
// and check that nothing is decided, audited, or executed twice and the right decision wins.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"os"
	"os/exec"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jmoiron/sqlx"

	"github.com/airlock-dev/airlock/activities"
	"github.com/airlock-dev/airlock/internal/approval"
	"github.com/airlock-dev/airlock/internal/store"
	"github.com/airlock-dev/airlock/workflows"
)

// s30Exec runs stmts on the test schema (dbURL's search_path).
func s30Exec(t *testing.T, dbURL string, stmts ...string) {
	t.Helper()
	db, err := sqlx.Open("postgres", dbURL)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	for _, s := range stmts {
		if _, err := db.Exec(s); err != nil {
			t.Fatalf("%s: %v", s, err)
		}
	}
}

// s30FailFirst installs a trigger on table that raises a server error on the first n firings
// that match cond (a sequence counts them: it is not rolled back with the failed statement);
// n = 0 fails every odd firing (a statement's prepared run, when its plain run follows at once).
func s30FailFirst(t *testing.T, dbURL, name, table, timing, cond string, n int) {
	s30Exec(t, dbURL,
		fmt.Sprintf(`CREATE SEQUENCE s30_%s`, name),
		fmt.Sprintf(`CREATE FUNCTION s30_%[1]s_fn() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  IF %[2]s THEN
    IF (%[3]d > 0 AND nextval('s30_%[1]s') <= %[3]d) OR (%[3]d = 0 AND nextval('s30_%[1]s') %% 2 = 1) THEN
      RAISE EXCEPTION 's30 injected failure on %[1]s';
    END IF;
  END IF;
  RETURN NEW;
END $$`, name, cond, n),
		fmt.Sprintf(`CREATE TRIGGER s30_%[1]s_tr %[2]s ON %[3]s FOR EACH ROW EXECUTE FUNCTION s30_%[1]s_fn()`, name, timing, table))
}

func s30SeqValue(t *testing.T, dbURL, name string) int64 {
	db, err := sqlx.Open("postgres", dbURL)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var v struct {
		Last   int64 `db:"last_value"`
		Called bool  `db:"is_called"`
	}
	if err := db.Get(&v, `SELECT last_value, is_called FROM s30_`+name); err != nil {
		t.Fatal(err)
	}
	if !v.Called {
		return 0
	}
	return v.Last
}

// A race of two approvers on turns whose every decision-path statement (the token's consume,
// the decision, the nonce, the audit row, the execution ledger's begin and finish) fails with a
// server error the first time (the prepared run) and succeeds as written: each turn is decided
// once, by exactly one of them, the loser is told who won, and the call runs once, with one
// audit row per event.
func TestStop30DecisionRaceThroughInjectedServerErrors(t *testing.T) {
	t.Parallel()
	e := newApprovalEnv(t)
	const rounds = 3
	// Triggers before the turns: every statement below hits them on its first firing(s).
	s30FailFirst(t, e.dbURL, "consume", "confirmations", "BEFORE UPDATE", `NEW.consumed_by <> '' AND OLD.consumed_by = ''`, 0)
	s30FailFirst(t, e.dbURL, "decide", "confirmations", "BEFORE UPDATE", `NEW.decision <> '' AND OLD.decision = ''`, 0)
	s30FailFirst(t, e.dbURL, "nonce", "decision_nonces", "BEFORE INSERT", `true`, 0)
	s30FailFirst(t, e.dbURL, "audit", "audit_events", "BEFORE INSERT", `true`, 0)
	s30FailFirst(t, e.dbURL, "execbegin", "executions", "BEFORE INSERT", `true`, 0)
	s30FailFirst(t, e.dbURL, "execfinish", "executions", "BEFORE UPDATE", `NEW.state <> OLD.state`, 0)
	runs, ps := raceTurns(t, e, "s30race", rounds)
	for i, p := range ps {
		names := []string{"alice", "bob"}
		if i%2 == 1 {
			names = []string{"bob", "alice"}
		}
		errs := e.raceApprovals(p.ConfirmationID, names)
		w := -1
		for k, err := range errs {
			if err == nil {
				if w >= 0 {
					t.Fatalf("race %d: both approvals report success", i)
				}
				w = k
			}
		}
		if w < 0 {
			t.Fatalf("race %d: neither approval won: %v / %v", i, errs[0], errs[1])
		}
		winner, loser := names[w], names[1-w]
		var np *approval.NotPendingError
		if err := errs[1-w]; !errors.As(err, &np) || np.Decision != store.DecisionApproved || np.Approver != winner {
			t.Fatalf("race %d: loser %s got %v, want NotPendingError naming approved by %s", i, loser, errs[1-w], winner)
		}
		res := result(t, runs[i])
		if got := outcomeList(res); got != "record_value:executed" || res.Outcomes[0].Approver != winner {
			t.Fatalf("race %d: outcomes = %s %+v, want executed by %s", i, got, res.Outcomes, winner)
		}
		n := 0
		for _, v := range e.rec.of("record_value") {
			if v == fmt.Sprintf(`{"message":"race-%d"}`, i) {
				n++
			}
		}
		if n != 1 {
			t.Fatalf("race %d: the call ran %d times", i, n)
		}
		if r := e.row(p.ConfirmationID); r.Decision != store.DecisionApproved || r.Approver != winner {
			t.Fatalf("race %d: confirmation decision %q approver %q", i, r.Decision, r.Approver)
		}
		seen := map[string]int{}
		for _, r := range e.audit(runs[i].GetID()) {
			seen[r.Outcome+"/"+r.Reason+"/"+r.Approver]++
			if r.Outcome == string(activities.OutcomeExecuted) && r.Approver != winner {
				t.Fatalf("race %d: executed audited for %s, winner %s", i, r.Approver, winner)
			}
		}
		for k, c := range seen {
			if c > 1 && !strings.HasPrefix(k, activities.AuditTokenReissued) {
				t.Fatalf("race %d: audit row %s written %d times: %v", i, k, c, seen)
			}
		}
		t.Logf("race %d: %s won; audit %v", i, winner, seen)
	}
	for _, name := range []string{"consume", "decide", "nonce", "audit", "execbegin", "execfinish"} {
		t.Logf("injected %s failures fired: %d", name, s30SeqValue(t, e.dbURL, name))
	}
	if got := e.countRows("executions"); got != rounds {
		t.Fatalf("execution ledger rows = %d, want %d", got, rounds)
	}
}

// A deny and an approval released together on a decision statement whose prepared run fails
// with a server error: a retried statement never flips the decision the store recorded first,
// what the turn did follows the stored decision, and the loser is told the stored decision.
func TestStop30DenyApproveRaceThroughInjectedServerErrors(t *testing.T) {
	t.Parallel()
	e := newApprovalEnv(t)
	const rounds = 4
	s30FailFirst(t, e.dbURL, "decide", "confirmations", "BEFORE UPDATE", `NEW.decision <> '' AND OLD.decision = ''`, 2*rounds)
	runs, ps := raceTurns(t, e, "s30dar", rounds)
	for i, p := range ps {
		kinds := []string{workflows.DecisionApprove, workflows.DecisionDeny}
		names := []string{"alice", "bob"}
		errs := make([]error, 2)
		start := make(chan struct{})
		var wg sync.WaitGroup
		for k := range 2 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				<-start
				errs[k] = e.approveUpdate(p.ConfirmationID, kinds[k], names[k])
			}()
		}
		close(start)
		wg.Wait()
		if (errs[0] == nil) == (errs[1] == nil) {
			t.Fatalf("round %d: want exactly one winner: approve %v / deny %v", i, errs[0], errs[1])
		}
		w := 0
		if errs[0] != nil {
			w = 1
		}
		row := e.row(p.ConfirmationID)
		wantDecision := map[int]string{0: store.DecisionApproved, 1: store.DecisionDenied}[w]
		if row.Decision != wantDecision || row.Approver != names[w] {
			t.Fatalf("round %d: %s (%s) was told it won, the store has %q by %q", i, kinds[w], names[w], row.Decision, row.Approver)
		}
		var np *approval.NotPendingError
		if !errors.As(errs[1-w], &np) || np.Decision != row.Decision || np.Approver != row.Approver {
			t.Fatalf("round %d: loser told %v, store has %q by %q", i, errs[1-w], row.Decision, row.Approver)
		}
		res := result(t, runs[i])
		ran := 0
		for _, v := range e.rec.of("record_value") {
			if v == fmt.Sprintf(`{"message":"race-%d"}`, i) {
				ran++
			}
		}
		if (w == 0) != (ran == 1) || ran > 1 {
			t.Fatalf("round %d: decision %s but the call ran %d times (%s)", i, row.Decision, ran, outcomeList(res))
		}
		t.Logf("round %d: %s won (%s)", i, kinds[w], outcomeList(res))
	}
}

// s30WithApp is dbURL with an application_name, so this test's store connections can be told
// from every other one.
func s30WithApp(t *testing.T, dbURL, app string) string {
	u, err := url.Parse(dbURL)
	if err != nil {
		t.Fatal(err)
	}
	q := u.Query()
	q.Set("application_name", app)
	u.RawQuery = q.Encode()
	return u.String()
}

// Every 150 ms every connection of the worker's store is terminated (pg_terminate_backend),
// while turns are issued, decided (approve and deny races) and their effects run: prepared
// statements then live on new connections. Every turn still ends, each call runs at most once
// and only when approved, and no decision or audit row is written twice.
func TestStop30TerminateStoreBackendsDuringDecisions(t *testing.T) {
	t.Parallel()
	e := newApprovalEnv(t)
	app := "s30kill-" + e.queue
	e.dbURL = s30WithApp(t, e.dbURL, app)
	admin, err := sqlx.Open("postgres", pgURL)
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close()
	const rounds = 4
	routes := map[string][]string{}
	for i := range rounds {
		routes[fmt.Sprintf("s30kill-%d-go", i)] = []string{calls(call("c1", "record_value", fmt.Sprintf(`{"message":"race-%d"}`, i)))}
	}
	model := newRoutedModel(t, routes)
	e.startWorker(e.openAI(model.URL))

	ctx, stop := context.WithCancel(context.Background())
	var killed atomic.Int64
	var kwg sync.WaitGroup
	kwg.Add(1)
	go func() {
		defer kwg.Done()
		for ctx.Err() == nil {
			var n []bool
			if err := admin.Select(&n, `SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = $1`, app); err == nil {
				killed.Add(int64(len(n)))
			}
			select {
			case <-ctx.Done():
			case <-time.After(150 * time.Millisecond):
			}
		}
	}()
	defer func() { stop(); kwg.Wait() }()

	var runs []string
	var rs []interface{ GetID() string }
	for i := range rounds {
		run, _ := e.startTurn(fmt.Sprintf("s30kill-%d", i), 1, workflows.TurnRequest{Message: fmt.Sprintf("s30kill-%d-go", i)})
		runs = append(runs, run.GetID())
		rs = append(rs, run)
	}
	for i, id := range runs {
		p := waitPending(t, e.c, id, map[string]bool{})
		kinds := []string{workflows.DecisionApprove, workflows.DecisionDeny}
		if i%2 == 1 {
			kinds = []string{workflows.DecisionApprove, workflows.DecisionApprove}
		}
		names := []string{"alice", "bob"}
		errs := make([]error, 2)
		var wg sync.WaitGroup
		for k := range 2 {
			wg.Add(1)
			go func() { defer wg.Done(); errs[k] = e.approveUpdate(p.ConfirmationID, kinds[k], names[k]) }()
		}
		wg.Wait()
		row := e.row(p.ConfirmationID)
		winners := 0
		for k, err := range errs {
			if err == nil {
				winners++
				if row.Approver != names[k] {
					t.Fatalf("turn %d: %s told it won, store approver %q (%s)", i, names[k], row.Approver, row.Decision)
				}
			} else {
				t.Logf("turn %d: %s %s: %v", i, names[k], kinds[k], err)
			}
		}
		if winners > 1 {
			t.Fatalf("turn %d: both decisions reported success", i)
		}
	}
	for i, id := range runs {
		_ = rs[i]
		res := result(t, e.c.GetWorkflow(context.Background(), id, ""))
		row := e.row(res.Outcomes[0].ConfirmationID)
		ran := 0
		for _, v := range e.rec.of("record_value") {
			if v == fmt.Sprintf(`{"message":"race-%d"}`, i) {
				ran++
			}
		}
		if ran > 1 || (ran == 1 && row.Decision != store.DecisionApproved) {
			t.Fatalf("turn %d: ran %d times, decision %q (%s)", i, ran, row.Decision, outcomeList(res))
		}
		seen := map[string]int{}
		for _, r := range e.audit(id) {
			seen[r.Outcome+"/"+r.Reason+"/"+r.Approver]++
		}
		for k, c := range seen {
			if c > 1 && !strings.HasPrefix(k, activities.AuditTokenReissued) && !strings.HasPrefix(k, activities.AuditConfirmationRefused) {
				t.Fatalf("turn %d: audit row %s written %d times: %v", i, k, c, seen)
			}
		}
		t.Logf("turn %d: %s decision %s by %s ran %d; audit %v", i, outcomeList(res), row.Decision, row.Approver, ran, seen)
	}
	t.Logf("backends terminated: %d", killed.Load())
	if killed.Load() == 0 {
		t.Fatal("no store backend was terminated: the test proves nothing")
	}
}

// Found and fixed (activities.finishLedger retries the finish while the attempt lasts); the
// defect was: a store fault that outlasts the prepared statement's one plain retry (both runs of the
// ledger's finish fail: a database restart, a failover, two terminated connections in a row)
// right after an approved effect ran and succeeded: the worker is alive and holds the result,
// yet the attempt fails, the retry finds the ledger row `started`, and the turn, the model
// and the audit are told `outcome_unknown` for a call that ran and succeeded. docs/security.md
// promises a database restart delays an approved call instead of making it outcome_unknown;
// that holds only before the ledger row is claimed.
func TestAttackFixedStoreBlipAfterEffectMakesExecutedCallOutcomeUnknown(t *testing.T) {
	t.Parallel()
	e := newApprovalEnv(t)
	// The finish of the ledger row fails twice (the prepared run and its plain retry), then works.
	s30FailFirst(t, e.dbURL, "execfinish", "executions", "BEFORE UPDATE", `NEW.state <> OLD.state`, 2)
	runs, ps := raceTurns(t, e, "s30blip", 1)
	if err := e.approveUpdate(ps[0].ConfirmationID, workflows.DecisionApprove, "alice"); err != nil {
		t.Fatal(err)
	}
	res := result(t, runs[0])
	ran := len(e.rec.of("record_value"))
	t.Logf("ran %d; outcomes %s; injected failures fired %d", ran, outcomeList(res), s30SeqValue(t, e.dbURL, "execfinish"))
	if ran != 1 {
		t.Fatalf("the call ran %d times", ran)
	}
	if got := outcomeList(res); got != "record_value:executed" {
		t.Fatalf("the effect ran once and succeeded, the store was back within ms, yet the turn reports %s (%s)", got, res.Outcomes[0].Detail)
	}
}

// The ledger's finish fails for the whole attempt (a store outage that outlasts it, right after
// an approved effect ran and succeeded: make test's store-outage test met it when the store
// went down between the ledger's begin and finish). The attempt stops retrying the finish
// before its deadline and hands the outcome to the turn, whose history keeps it: the call is
// reported executed, never outcome_unknown, and never runs twice.
func TestStoreAwayForTheWholeFinishStillReportsTheEffect(t *testing.T) {
	t.Parallel()
	e := newApprovalEnv(t)
	s30FailFirst(t, e.dbURL, "execfinishall", "executions", "BEFORE UPDATE", `NEW.state <> OLD.state`, 1000000)
	runs, ps := raceTurns(t, e, "s30away", 1)
	if err := e.approveUpdate(ps[0].ConfirmationID, workflows.DecisionApprove, "alice"); err != nil {
		t.Fatal(err)
	}
	res := result(t, runs[0])
	ran := len(e.rec.of("record_value"))
	fired := s30SeqValue(t, e.dbURL, "execfinishall")
	t.Logf("ran %d; outcomes %s; injected finish failures %d", ran, outcomeList(res), fired)
	if fired < 2 {
		t.Fatalf("the finish failed %d times: the test proves nothing", fired)
	}
	if ran != 1 {
		t.Fatalf("the call ran %d times", ran)
	}
	if got := outcomeList(res); got != "record_value:executed" {
		t.Fatalf("the effect ran once and succeeded, yet the turn reports %s (%s)", got, res.Outcomes[0].Detail)
	}
}

// `airlock pending` and `airlock turn show` against the PostgreSQL store through the CLI, with
// airlock_prepare on and off, on a turn whose model put terminal controls, a bidi override,
// HTML and a long string into the pending call's arguments: every line is terminal-safe. A bad
// airlock_prepare value is refused without echoing the URL's password.
func TestStop30CLIHostileArgumentsAndPrepareParam(t *testing.T) {
	t.Parallel()
	e := newApprovalEnv(t)
	hostile := "ok\x1b[2J\x1b[H\a\rfake\nline\u009b31m\u202eevil\u200b<script>alert(1)</script>" + strings.Repeat("Z", 70000)
	args, _ := json.Marshal(map[string]string{"message": hostile})
	model := newRoutedModel(t, map[string][]string{"s30cli-go": {calls(call("c1", "record_value", string(args)))}})
	e.startWorker(e.openAI(model.URL))
	run, _ := e.startTurn("s30cli", 1, workflows.TurnRequest{Message: "s30cli-go"})
	defer e.c.TerminateWorkflow(context.Background(), run.GetID(), "", "test done")
	p := waitPending(t, e.c, run.GetID(), map[string]bool{})
	env := func(dbURL string) []string {
		return append(os.Environ(), "AIRLOCK_HOME="+e.home, "AIRLOCK_DATABASE_URL="+dbURL, "AIRLOCK_TASK_QUEUE="+e.queue,
			"TEMPORAL_ADDRESS="+devServer.Address, "TEMPORAL_NAMESPACE="+devServer.Namespace)
	}
	for _, mode := range []string{"on", "off", "OFF", ""} {
		u := e.dbURL + "&airlock_prepare=" + mode
		for _, argv := range [][]string{{"pending"}, {"turn", "show", run.GetID()}} {
			cmd := exec.Command(airlockBin, argv...)
			cmd.Env = env(u)
			out, err := cmd.CombinedOutput()
			if err != nil {
				t.Fatalf("airlock %v (prepare %q): %v\n%.2000s", argv, mode, err, out)
			}
			if argv[0] == "pending" && !strings.Contains(string(out), p.ConfirmationID) {
				t.Fatalf("pending (prepare %q) does not list %s:\n%.2000s", mode, p.ConfirmationID, out)
			}
			for _, bad := range []string{"\x1b", "\a", "\r", "\u009b", "\u202e", "\u200b"} { // HTML is inert on a terminal
				if strings.Contains(string(out), bad) {
					t.Fatalf("airlock %v (prepare %q) printed %q raw:\n%.3000q", argv, mode, bad, out)
				}
			}
			if len(out) > 200000 {
				t.Fatalf("airlock %v printed %d bytes", argv, len(out))
			}
		}
	}
	pw, _ := url.Parse(e.dbURL)
	for _, bad := range []string{"maybe", "of%66", "%zz", "on&airlock_prepare=bogus"} {
		cmd := exec.Command(airlockBin, "pending")
		cmd.Env = env(e.dbURL + "&airlock_prepare=" + bad)
		out, err := cmd.CombinedOutput()
		secret, _ := pw.User.Password()
		t.Logf("airlock_prepare=%s: %v: %s", bad, err, strings.TrimSpace(string(out)))
		if bad == "of%66" {
			if err != nil {
				t.Fatalf("a percent-encoded off was refused: %s", out)
			}
			continue
		}
		if err == nil {
			t.Fatalf("airlock_prepare=%s accepted:\n%s", bad, out)
		}
		if secret != "" && strings.Contains(string(out), ":"+secret+"@") {
			t.Fatalf("the error for airlock_prepare=%s shows the password: %s", bad, out)
		}
	}
}

// Found and fixed (bench.ReportRuns refuses a run with an earlier run's rounds); the defect
// was: `airlock bench report RUN.jsonl RUN.jsonl`: one run named twice is read as two runs, so the
// report claims twice the rounds it measured (the published stop 30 result rests on "six
// rounds" pooled from two files): medians and ranges over duplicated rounds look more
// robust than the data. The same file given twice (or two files with the same rounds) should
// be refused.
func TestAttackFixedBenchReportCountsOneRunTwice(t *testing.T) {
	run := repoRoot + "/docs/bench/2026-12-04-stop30-run1.jsonl"
	once, err := exec.Command(airlockBin, "bench", "report", run).CombinedOutput()
	if err != nil {
		t.Fatalf("%v\n%s", err, once)
	}
	twice, err := exec.Command(airlockBin, "bench", "report", run, run).CombinedOutput()
	if err != nil {
		t.Logf("refused: %s", twice)
		return
	}
	firstLine := func(b []byte) string {
		for _, l := range strings.Split(string(b), "\n") {
			if strings.Contains(l, "rounds") {
				return l
			}
		}
		return ""
	}
	t.Fatalf("the same run given twice was accepted as a pooled run:\n once: %s\n twice: %s", firstLine(once), firstLine(twice))
}
