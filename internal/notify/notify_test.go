package notify_test

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"encoding/pem"
	"io"
	"math/big"
	"mime"
	"mime/multipart"
	"mime/quotedprintable"
	"net"
	"net/http"
	"net/http/httptest"
	netmail "net/mail"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	smtp "github.com/emersion/go-smtp"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/airlock-dev/airlock/internal/notify"
	"github.com/airlock-dev/airlock/internal/notify/channels"
	"github.com/airlock-dev/airlock/internal/notify/slack"
	"github.com/airlock-dev/airlock/internal/notify/webhook"
	"github.com/airlock-dev/airlock/internal/provenance"
	"github.com/airlock-dev/airlock/internal/store"
)

// hostile are argument values a model may write to fool an approver or a channel: Slack
// mentions and links, mrkdwn, HTML, header injection, bidi overrides and zero-width characters.
const hostile = `{"to":"<!channel> <@U123> <https://evil.example|click here> *bold* _it_ ~s~ ` + "`code`" + `",` +
	`"body":"<script>alert(1)</script><a href=\"https://evil.example\">x</a>\r\nBcc: victim@example.com\r\n\r\nhi \u202egpj.exe\u200b"}`

const sealed = "SEALED-TOKEN-MUST-NOT-LEAK"

func openStore(t *testing.T) *store.Store {
	t.Helper()
	st, err := store.Open(context.Background(), "sqlite:"+filepath.Join(t.TempDir(), "airlock.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return st
}

func confirmation(t *testing.T, st *store.Store, id string, now time.Time) store.Confirmation {
	t.Helper()
	disc := `{"description":"Send an e-mail","side_effect":"external_write","network":"external","destination":{"kind":"host","name":"smtp.example","fields":["to","body"]},` +
		`"hosts":[{"host":"xn--pple-43d.example","written":"аpple.example","field":"to"}],"leaving":[{"field":"to","value":"<!here> \u200bx"}]}`
	c, err := st.CreateConfirmation(context.Background(), store.Confirmation{
		ID: id, TokenHash: bytes.Repeat([]byte(id[len(id)-1:]), 32), SealedToken: []byte(sealed), WorkflowID: "turn/conv<b>\u202e/1", RunID: "run-1", Seq: 1,
		CallID: "call_1", CapabilityID: "send_email", Version: 1, ArgsDigest: "sha256:abcd", Arguments: json.RawMessage(hostile),
		Display: "send_email", CreatedAt: now, ExpiresAt: now.Add(10 * time.Minute), Disclosure: json.RawMessage(disc),
	})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// inert checks that body holds none of the raw hostile characters or a token.
func inert(t *testing.T, what, body string) {
	t.Helper()
	for _, bad := range []string{"\u202e", "\u200b", sealed, "\r\nBcc:"} {
		if strings.Contains(body, bad) {
			t.Errorf("%s carries %q raw: %s", what, bad, body)
		}
	}
}

type webhookReceiver struct {
	secret []byte
	mu     sync.Mutex
	fail   int // answer 500 to this many requests first
	got    map[string]int
	bodies [][]byte
	bad    int
}

func (r *webhookReceiver) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	body, _ := io.ReadAll(req.Body)
	r.mu.Lock()
	defer r.mu.Unlock()
	if err := webhook.Verify(r.secret, req.Header.Get(webhook.HeaderTimestamp), req.Header.Get(webhook.HeaderSignature), body, 5*time.Minute, time.Now()); err != nil {
		r.bad++
		http.Error(w, err.Error(), http.StatusUnauthorized)
		return
	}
	if r.fail > 0 {
		r.fail--
		http.Error(w, "try later", http.StatusInternalServerError)
		return
	}
	r.got[req.Header.Get(webhook.HeaderDelivery)]++
	r.bodies = append(r.bodies, body)
}

type slackFake struct {
	mu   sync.Mutex
	msgs []slack.Message
	auth []string
}

func (s *slackFake) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	var m slack.Message
	_ = json.NewDecoder(r.Body).Decode(&m)
	s.mu.Lock()
	s.msgs = append(s.msgs, m)
	s.auth = append(s.auth, r.Header.Get("Authorization"))
	s.mu.Unlock()
	if strings.HasSuffix(r.URL.Path, "/chat.postMessage") {
		_, _ = io.WriteString(w, `{"ok":true}`)
		return
	}
	_, _ = io.WriteString(w, "ok")
}

type mailBackend struct {
	mu    sync.Mutex
	mails []string
	tls   []bool
}

type mailSession struct {
	b    *mailBackend
	conn *smtp.Conn
}

func (b *mailBackend) NewSession(c *smtp.Conn) (smtp.Session, error) {
	return &mailSession{b: b, conn: c}, nil
}
func (s *mailSession) Reset()                               {}
func (s *mailSession) Logout() error                        { return nil }
func (s *mailSession) Mail(string, *smtp.MailOptions) error { return nil }
func (s *mailSession) Rcpt(string, *smtp.RcptOptions) error { return nil }
func (s *mailSession) Data(r io.Reader) error {
	b, err := io.ReadAll(r)
	if err != nil {
		return err
	}
	_, ok := s.conn.TLSConnectionState()
	s.b.mu.Lock()
	s.b.mails = append(s.b.mails, string(b))
	s.b.tls = append(s.b.tls, ok)
	s.b.mu.Unlock()
	return nil
}

// smtpServer runs a local SMTP server offering STARTTLS with a fresh self-signed certificate;
// it returns its address and the CA file that trusts it.
func smtpServer(t *testing.T) (*mailBackend, string, string) {
	t.Helper()
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "127.0.0.1"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour), IPAddresses: []net.IP{net.ParseIP("127.0.0.1")},
		KeyUsage: x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}, IsCA: true, BasicConstraintsValid: true}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	ca := filepath.Join(t.TempDir(), "ca.pem")
	if err := os.WriteFile(ca, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
	be := &mailBackend{}
	srv := smtp.NewServer(be)
	srv.Domain = "localhost"
	srv.TLSConfig = &tls.Config{Certificates: []tls.Certificate{{Certificate: [][]byte{der}, PrivateKey: key}}}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = srv.Serve(l) }()
	t.Cleanup(func() { srv.Close() })
	return be, l.Addr().String(), ca
}

// mailParts decodes a multipart/alternative mail into its parts by content type.
func mailParts(t *testing.T, raw string) map[string]string {
	t.Helper()
	msg, err := netmail.ReadMessage(strings.NewReader(raw))
	if err != nil {
		t.Fatal(err)
	}
	_, params, err := mime.ParseMediaType(msg.Header.Get("Content-Type"))
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	mr := multipart.NewReader(msg.Body, params["boundary"])
	for {
		p, err := mr.NextRawPart()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		var r io.Reader = p
		if p.Header.Get("Content-Transfer-Encoding") == "quoted-printable" {
			r = quotedprintable.NewReader(p)
		}
		b, _ := io.ReadAll(r)
		ct, _, _ := mime.ParseMediaType(p.Header.Get("Content-Type"))
		out[ct] = string(b)
	}
	if msg.Header.Get("Bcc") != "" || len(msg.Header["X-Airlock-Delivery"]) != 1 {
		t.Errorf("mail headers: %v", msg.Header)
	}
	return out
}

func writeFile(t *testing.T, path, body string) {
	t.Helper()
	if err := os.WriteFile(path+".tmp", []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(path+".tmp", path); err != nil {
		t.Fatal(err)
	}
}

// TestEveryChannelReceivesOneInertNotice: a pending confirmation with hostile arguments is
// delivered once to a signed webhook, a Slack incoming webhook, Slack chat.postMessage and an
// SMTP server over STARTTLS; every channel shows the facts (capability, destination, expiry,
// link) with the hostile values inert, and none carries the sealed token. A second tick sends
// nothing again.
func TestEveryChannelReceivesOneInertNotice(t *testing.T) {
	st := openStore(t)
	dir := t.TempDir()
	hook := &webhookReceiver{secret: []byte("hook-secret"), got: map[string]int{}}
	hs := httptest.NewServer(hook)
	defer hs.Close()
	sl := &slackFake{}
	ss := httptest.NewServer(sl)
	defer ss.Close()
	mail, smtpAddr, ca := smtpServer(t)
	writeFile(t, filepath.Join(dir, "hook.secret"), "hook-secret\n")
	writeFile(t, filepath.Join(dir, "slack.url"), ss.URL+"/services/T/B/SECRETPATH\n")
	t.Setenv("TEST_SLACK_TOKEN", "xoxb-test-token")
	cfgPath := filepath.Join(dir, "notify.yaml")
	writeFile(t, cfgPath, `base_url: https://airlock.example/
channels:
  - {name: hook, type: webhook, url: `+hs.URL+`/airlock, secret: {file: `+filepath.Join(dir, "hook.secret")+`}}
  - {name: slack-in, type: slack, secret: {file: `+filepath.Join(dir, "slack.url")+`}}
  - {name: slack-bot, type: slack, url: `+ss.URL+`/api, token: {env: TEST_SLACK_TOKEN}, slack_channel: C123}
  - {name: mail, type: email, smtp: "`+smtpAddr+`", from: airlock@example.com, to: [ops@example.com], ca_file: `+ca+`}
routes:
  - capabilities: [send_*]
    channels: [hook, slack-in, slack-bot, mail]
  - capabilities: [files.*]
    channels: [hook]
`)
	src := notify.NewSource(cfgPath)
	now := time.Now().UTC()
	c := confirmation(t, st, "cf-0001", now)
	ob := &notify.Outbox{Store: st, Source: src}
	for range 2 { // a retried IssueConfirmation enqueues again: nothing twice
		if err := ob.Pending(context.Background(), c); err != nil {
			t.Fatal(err)
		}
	}
	m := notify.NewMetrics(st)
	d := &notify.Dispatcher{Store: st, Source: src, Open: channels.Open, Metrics: m}
	for range 2 {
		if err := d.Tick(context.Background()); err != nil {
			t.Fatal(err)
		}
		d.Wait()
	}
	if len(hook.got) != 1 || hook.bad != 0 {
		t.Fatalf("webhook deliveries %v, bad signatures %d", hook.got, hook.bad)
	}
	var n notify.Notice
	if err := json.Unmarshal(hook.bodies[0], &n); err != nil {
		t.Fatal(err)
	}
	if n.DeliveryID != notify.DeliveryID("cf-0001", notify.KindPending, "hook") || hook.got[n.DeliveryID] != 1 {
		t.Fatalf("delivery id: %s (%v)", n.DeliveryID, hook.got)
	}
	if n.Capability != "send_email@1" || n.Leaves.Destination != "host smtp.example" || !n.ExpiresAt.Equal(c.ExpiresAt) ||
		!strings.HasPrefix(n.Link, "https://airlock.example/turn?id=turn%2Fconv%3Cb%3E") || !strings.HasSuffix(n.Link, "#cf-0001") {
		t.Fatalf("notice facts: %+v", n)
	}
	all := string(hook.bodies[0])
	if !strings.Contains(all, "U+202E") || !strings.Contains(all, "U+200B") {
		t.Fatalf("hidden characters not made visible: %s", all)
	}
	inert(t, "webhook", all)

	if len(sl.msgs) != 2 {
		t.Fatalf("slack messages: %d", len(sl.msgs))
	}
	for i, msg := range sl.msgs {
		if strings.ContainsAny(msg.Text, "<>") {
			t.Errorf("fallback text not escaped: %q", msg.Text)
		}
		b, _ := json.Marshal(msg)
		inert(t, "slack", string(b))
		if !strings.Contains(string(b), "host smtp.example") || !strings.Contains(string(b), "https://airlock.example/turn?id=") {
			t.Errorf("slack blocks lack the facts: %s", b)
		}
		for _, blk := range msg.Blocks {
			if blk.Text != nil && blk.Text.Type != "plain_text" {
				t.Errorf("model-written values in a %s object: %+v", blk.Text.Type, blk)
			}
		}
		if (sl.auth[i] == "Bearer xoxb-test-token") != (msg.Channel == "C123") {
			t.Errorf("message %d: auth %q channel %q", i, sl.auth[i], msg.Channel)
		}
	}
	if len(mail.mails) != 1 || !mail.tls[0] {
		t.Fatalf("mails %d, over TLS %v", len(mail.mails), mail.tls)
	}
	body := mail.mails[0]
	if !strings.Contains(body, "Message-ID: <"+notify.DeliveryID("cf-0001", notify.KindPending, "mail")+"@example.com>") {
		t.Errorf("mail message id: %s", body)
	}
	inert(t, "mail", body)
	parts := mailParts(t, body)
	if !strings.Contains(parts["text/html"], "&lt;script&gt;") || strings.Contains(parts["text/html"], "<script>") ||
		strings.Contains(parts["text/html"], `<a href="https://evil`) || !strings.Contains(parts["text/html"], `<a href="https://airlock.example/turn?id=`) {
		t.Errorf("HTML part not escaped: %s", parts["text/html"])
	}
	if !strings.Contains(parts["text/plain"], "goes to: host smtp.example") || !strings.Contains(parts["text/plain"], "U+202E") {
		t.Errorf("text part: %s", parts["text/plain"])
	}
	for ct, p := range parts {
		inert(t, "mail "+ct, p)
	}
	if got := testutil.ToFloat64(m.Sent.WithLabelValues("mail", "pending")); got != 1 {
		t.Errorf("sent metric: %v", got)
	}
	evs, _ := st.ListAudit(context.Background(), c.WorkflowID)
	sent := 0
	for _, e := range evs {
		if e.Outcome == "notice_sent" {
			sent++
		}
	}
	if sent != 4 {
		t.Errorf("audited sends: %d of %+v", sent, evs)
	}
}

// TestRetryBackoffAndGiveUp: a failing receiver gets the same delivery id again after the
// backoff, not before; the failure is counted; after MaxAttempts the delivery is failed and
// audited; an unreachable channel never blocks another channel's notice.
func TestRetryBackoffAndGiveUp(t *testing.T) {
	st := openStore(t)
	dir := t.TempDir()
	hook := &webhookReceiver{secret: []byte("s"), got: map[string]int{}, fail: 1}
	hs := httptest.NewServer(hook)
	defer hs.Close()
	dead, _ := net.Listen("tcp", "127.0.0.1:0")
	deadURL := "http://" + dead.Addr().String() + "/x?key=URLSECRET"
	dead.Close()
	t.Setenv("TEST_HOOK_SECRET", "s")
	cfgPath := filepath.Join(dir, "notify.yaml")
	writeFile(t, cfgPath, `channels:
  - {name: hook, type: webhook, url: `+hs.URL+`, secret: {env: TEST_HOOK_SECRET}}
  - {name: dead, type: webhook, url: "`+deadURL+`", secret: {env: TEST_HOOK_SECRET}}
routes:
  - channels: [hook, dead]
`)
	src := notify.NewSource(cfgPath)
	clock := time.Now().UTC()
	c := confirmation(t, st, "cf-0002", clock)
	if err := (&notify.Outbox{Store: st, Source: src}).Pending(context.Background(), c); err != nil {
		t.Fatal(err)
	}
	m := notify.NewMetrics(nil)
	d := &notify.Dispatcher{Store: st, Source: src, Open: channels.Open, Metrics: m, MaxAttempts: 3,
		Backoff: func(int) time.Duration { return time.Minute }, Now: func() time.Time { return clock }}
	tick := func() {
		if err := d.Tick(context.Background()); err != nil {
			t.Fatal(err)
		}
		d.Wait()
	}
	tick()
	tick() // backing off: nothing re-sent
	if len(hook.got) != 0 || testutil.ToFloat64(m.Failures.WithLabelValues("hook")) != 1 {
		t.Fatalf("after one failure: got %v, failures %v", hook.got, testutil.ToFloat64(m.Failures.WithLabelValues("hook")))
	}
	clock = clock.Add(61 * time.Second)
	tick()
	if len(hook.got) != 1 {
		t.Fatalf("after the backoff: %v", hook.got)
	}
	clock = clock.Add(61 * time.Second)
	tick()
	ds, _ := st.ListDeliveries(context.Background(), "cf-0002")
	for _, del := range ds {
		switch del.Channel {
		case "hook":
			if del.State != store.NoticeSent || del.Attempts != 2 {
				t.Errorf("hook delivery: %+v", del)
			}
		case "dead":
			if del.State != store.NoticeFailed || del.Attempts != 3 || !strings.Contains(del.LastError, "gave up after 3 attempts") {
				t.Errorf("dead delivery: %+v", del)
			}
			if strings.Contains(del.LastError, "URLSECRET") {
				t.Errorf("the channel URL leaked into the error: %s", del.LastError)
			}
		}
	}
	if testutil.ToFloat64(m.GivenUp.WithLabelValues("dead")) != 1 {
		t.Error("given-up metric")
	}
	stats, _ := st.NoticeOutboxStats(context.Background())
	if stats.Failed != 1 || stats.Sent != 1 || stats.Queued != 0 {
		t.Errorf("stats %+v", stats)
	}
}

// TestRemindersAndEscalationAreScheduledAndSkippedOnceDecided: a route with remind_at and
// escalate_at owes a reminder and an escalation at those fractions of the expiry; they are sent
// while the confirmation is undecided, and skipped (and audited) once it is decided.
func TestRemindersAndEscalationAreScheduledAndSkippedOnceDecided(t *testing.T) {
	st := openStore(t)
	dir := t.TempDir()
	hook := &webhookReceiver{secret: []byte("s"), got: map[string]int{}}
	hs := httptest.NewServer(hook)
	defer hs.Close()
	t.Setenv("TEST_HOOK_SECRET", "s")
	cfgPath := filepath.Join(dir, "notify.yaml")
	writeFile(t, cfgPath, `channels:
  - {name: team, type: webhook, url: `+hs.URL+`/team, secret: {env: TEST_HOOK_SECRET}}
  - {name: lead, type: webhook, url: `+hs.URL+`/lead, secret: {env: TEST_HOOK_SECRET}}
routes:
  - {capabilities: [send_email], channels: [team], remind_at: 0.5, escalate_at: 0.8, escalate_to: [lead]}
`)
	src := notify.NewSource(cfgPath)
	start := time.Now().UTC()
	clock := start
	a := confirmation(t, st, "cf-000a", start)
	b := confirmation(t, st, "cf-000b", start)
	ob := &notify.Outbox{Store: st, Source: src}
	for _, c := range []store.Confirmation{a, b} {
		if err := ob.Pending(context.Background(), c); err != nil {
			t.Fatal(err)
		}
	}
	ds, _ := st.ListDeliveries(context.Background(), "cf-000a")
	due := map[string]time.Duration{}
	for _, d := range ds {
		due[d.Kind+"/"+d.Channel] = d.DueAt.Sub(a.CreatedAt)
	}
	if due["pending/team"] != 0 || due["reminder/team"] != 5*time.Minute || due["escalation/lead"] != 8*time.Minute || len(due) != 3 {
		t.Fatalf("schedule: %v", due)
	}
	d := &notify.Dispatcher{Store: st, Source: src, Open: channels.Open, Now: func() time.Time { return clock }}
	tick := func() {
		if err := d.Tick(context.Background()); err != nil {
			t.Fatal(err)
		}
		d.Wait()
	}
	tick()
	if err := st.DecideConfirmation(context.Background(), "cf-000b", store.DecisionApproved, "alice", "", clock); err != nil {
		t.Fatal(err)
	}
	clock = start.Add(9 * time.Minute)
	tick()
	if len(hook.got) != 4 { // a: pending, reminder, escalation; b: pending only
		t.Fatalf("deliveries: %v", hook.got)
	}
	kinds := map[string]int{}
	for _, body := range hook.bodies {
		var n notify.Notice
		_ = json.Unmarshal(body, &n)
		kinds[n.Kind+"/"+n.Channel+"/"+n.ConfirmationID]++
	}
	if kinds["confirmation_escalated/lead/cf-000a"] != 1 || kinds["confirmation_reminder/team/cf-000a"] != 1 || kinds["confirmation_reminder/team/cf-000b"] != 0 {
		t.Fatalf("kinds: %v", kinds)
	}
	evs, _ := st.ListAudit(context.Background(), a.WorkflowID)
	skipped := 0
	for _, e := range evs {
		if e.Outcome == "notice_skipped" && strings.Contains(e.Detail, "approved first") {
			skipped++
		}
	}
	if skipped != 2 {
		t.Fatalf("skipped audited: %d", skipped)
	}
}

// TestNotifyFileErrorsAndLiveReload: bad files are refused with the reason; a file changed on
// disk is picked up; a broken edit keeps the last good file in force and says so.
func TestNotifyFileErrorsAndLiveReload(t *testing.T) {
	for _, tc := range []struct{ body, want string }{
		{"channels: [{name: a, type: pager}]", "want webhook, slack or email"},
		{"channels: [{name: a, type: webhook}, {name: a, type: webhook}]", "defined twice"},
		{"channels: [{name: a, type: webhook}]\nroutes: [{channels: [b]}]", `no channel named "b"`},
		{"channels: [{name: a, type: webhook}]\nroutes: [{channels: [a], remind_at: 1.5}]", "fractions"},
		{"channels: [{name: a, type: webhook}]\nroutes: [{channels: [a], escalate_at: 0.5}]", "escalate_to"},
		{"channel: []", "field channel not found"},
	} {
		if _, err := notify.Parse([]byte(tc.body)); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%q: %v (want %q)", tc.body, err, tc.want)
		}
	}
	if _, err := channels.Open(notify.ChannelConfig{Name: "w", Type: "webhook", URL: "https://x.example", Secret: notify.Secret{Env: "NOPE_UNSET_VAR"}}); err == nil || !strings.Contains(err.Error(), "NOPE_UNSET_VAR") {
		t.Errorf("missing secret: %v", err)
	}
	path := filepath.Join(t.TempDir(), "notify.yaml")
	writeFile(t, path, "channels: [{name: a, type: webhook}]\nroutes: [{channels: [a]}]\n")
	src := notify.NewSource(path)
	f, rev1, err := src.Current()
	if err != nil || len(f.Routes) != 1 {
		t.Fatal(f, err)
	}
	writeFile(t, path, "channels: [{name: a, type: webhook}, {name: b, type: slack}]\nroutes: [{channels: [a, b]}]\n")
	f, rev2, err := src.Current()
	if err != nil || len(f.Channels) != 2 || rev1 == rev2 {
		t.Fatalf("reload: %+v %v", f, err)
	}
	writeFile(t, path, "channels: [{name: a, type: nope}]\n")
	f, rev3, err := src.Current()
	if err == nil || !strings.Contains(err.Error(), "last good file stays in force") || len(f.Channels) != 2 || rev3 != rev2 {
		t.Fatalf("broken edit: %+v %v", f, err)
	}
}

// TestSlackButtonsOnlyWhereThePolicyLetsSlackDecide: a route with slack_decide puts Approve and
// Deny buttons bound to the confirmation id and the argument digest on Slack notices only; other
// capabilities, calls decided only with a passkey and other channels get none; slack_decide
// without slack_interactive is refused.
func TestSlackButtonsOnlyWhereThePolicyLetsSlackDecide(t *testing.T) {
	if _, err := notify.Parse([]byte("channels: [{name: s, type: slack}]\nroutes: [{channels: [s], slack_decide: true}]")); err == nil || !strings.Contains(err.Error(), "slack_interactive") {
		t.Fatalf("slack_decide without slack_interactive: %v", err)
	}
	f, err := notify.Parse([]byte(`slack_interactive: {signing_secret: {env: X}, users: {U1: alice}}
channels: [{name: s, type: slack}, {name: w, type: webhook}]
routes:
  - {capabilities: [send_email], channels: [s, w], slack_decide: true}
  - {capabilities: [files.*], channels: [s]}
`))
	if err != nil {
		t.Fatal(err)
	}
	st := openStore(t)
	c := confirmation(t, st, "cf-0003", time.Now())
	ds, err := notify.Deliveries(f, c)
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range ds {
		var n notify.Notice
		_ = json.Unmarshal(d.Payload, &n)
		want := ""
		if d.Channel == "s" {
			want = "cf-0003|sha256:abcd"
		}
		if n.Decide != want {
			t.Errorf("%s: decide %q, want %q", d.Channel, n.Decide, want)
		}
		if d.Channel == "s" {
			m := slack.Render(n)
			last := m.Blocks[len(m.Blocks)-1]
			if len(last.Elements) != 2 || last.Elements[0].ActionID != slack.ActionApprove || last.Elements[1].ActionID != slack.ActionDeny || last.Elements[0].Value != want {
				t.Errorf("buttons: %+v", last)
			}
		}
	}
	// A capability decided only with a passkey gets no buttons: Slack cannot carry a passkey.
	pk := c
	pk.PasskeyRequired = true
	ds, _ = notify.Deliveries(f, pk)
	for _, d := range ds {
		var n notify.Notice
		_ = json.Unmarshal(d.Payload, &n)
		if n.Decide != "" {
			t.Errorf("a passkey-required call got Slack buttons: %+v", n)
		}
	}
	c.CapabilityID = "files.write"
	ds, _ = notify.Deliveries(f, c)
	for _, d := range ds {
		var n notify.Notice
		_ = json.Unmarshal(d.Payload, &n)
		if n.Decide != "" {
			t.Errorf("files.write may not be decided from Slack: %+v", n)
		}
	}
}

// TestAgentProposalNotice: a stored agent proposal is owed a notice on the routes for all
// capabilities (or "proposal.<kind>"), sent once with its content inert and a link to the
// proposals page, and skipped once it is decided.
func TestAgentProposalNotice(t *testing.T) {
	st := openStore(t)
	dir := t.TempDir()
	hook := &webhookReceiver{secret: []byte("s"), got: map[string]int{}}
	hs := httptest.NewServer(hook)
	defer hs.Close()
	t.Setenv("TEST_HOOK_SECRET", "s")
	cfgPath := filepath.Join(dir, "notify.yaml")
	writeFile(t, cfgPath, `base_url: https://airlock.example
channels: [{name: hook, type: webhook, url: `+hs.URL+`, secret: {env: TEST_HOOK_SECRET}}]
routes: [{capabilities: ["proposal.*"], channels: [hook]}]
`)
	src := notify.NewSource(cfgPath)
	ctx := context.Background()
	mk := func(id string) store.ProposalRow {
		return store.ProposalRow{ID: id, Kind: "memory-change", WorkflowID: "turn/p/" + id, Conversation: "p", OutputID: "o-" + id, SnapshotID: "snap-" + id,
			Payload: json.RawMessage(`{"memory":"remember \u202e<!channel> forever"}`)}
	}
	for _, id := range []string{"pr-1", "pr-2"} {
		p := mk(id)
		if _, err := st.PutSnapshot(ctx, p.SnapshotID, p.WorkflowID, 1, []byte(`{}`)); err != nil {
			t.Fatal(err)
		}
		if err := st.Settle(ctx, store.Settlement{WorkflowID: p.WorkflowID, Conversation: "p", Proposals: []store.ProposalRow{p}, Result: json.RawMessage(`{}`)}); err != nil {
			t.Fatal(err)
		}
		for range 2 {
			if err := (&notify.Outbox{Store: st, Source: src}).Proposals(ctx, []store.ProposalRow{p}); err != nil {
				t.Fatal(err)
			}
		}
	}
	if _, _, err := st.AppendProposalDecision(ctx, store.ProposalDecision{ID: "d-2", ProposalID: "pr-2", Disposition: "reject", Actor: "alice", SubmissionID: "s", Digest: "x", Attestation: json.RawMessage(`{}`)}); err != nil {
		t.Fatal(err)
	}
	d := &notify.Dispatcher{Store: st, Source: src, Open: channels.Open}
	for range 2 {
		if err := d.Tick(ctx); err != nil {
			t.Fatal(err)
		}
		d.Wait()
	}
	if len(hook.got) != 1 || hook.got[notify.DeliveryID("pr-1", notify.KindProposal, "hook")] != 1 {
		t.Fatalf("deliveries: %v", hook.got)
	}
	var n notify.Notice
	_ = json.Unmarshal(hook.bodies[0], &n)
	if n.Kind != notify.EventProposal || n.Link != "https://airlock.example/proposals#pr-1" || len(n.Arguments) != 1 || !strings.Contains(n.Arguments[0], "U+202E") {
		t.Fatalf("notice: %+v", n)
	}
	inert(t, "proposal notice", string(hook.bodies[0]))
	del, _ := st.GetDelivery(ctx, notify.DeliveryID("pr-2", notify.KindProposal, "hook"))
	if del.State != store.NoticeSkipped {
		t.Fatalf("decided proposal's notice: %+v", del)
	}
}

// A route may name approver groups (issue 21's policy approval/groups): it then notifies only
// for confirmations those groups may decide, beside the routes that name none.
func TestRoutesByApproverGroup(t *testing.T) {
	f, err := notify.Parse([]byte(`channels:
  - {name: all, type: webhook, url: "http://127.0.0.1:1/all", secret: {env: X}}
  - {name: payments, type: webhook, url: "http://127.0.0.1:1/pay", secret: {env: X}}
routes:
  - {channels: [all]}
  - {groups: [payments], channels: [payments]}
`))
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		groups []string
		want   string
	}{
		{nil, "all"},
		{[]string{"payments"}, "all payments"},
		{[]string{"ops", "payments"}, "all payments"},
		{[]string{"ops"}, "all"},
	} {
		if got := strings.Join(f.PlanFor("bank.send", tc.groups).Now, " "); got != tc.want {
			t.Errorf("groups %v: channels %q, want %q", tc.groups, got, tc.want)
		}
	}
}

// A notice keeps the "only in untrusted data" mark of a value however long the source the
// model chose (a padded file name): the mark leads the line, and the label's verdict fits.
func TestNoticeKeepsTheUntrustedMark(t *testing.T) {
	rep, err := provenance.Compute(json.RawMessage(`{"recipient":"US133000000121212121212"}`), []provenance.Entry{
		{Kind: provenance.SourceResult, Capability: "files.read", SourceURL: "bill.txt" + strings.Repeat("_", 400), Text: "send to US133000000121212121212"},
	})
	if err != nil {
		t.Fatal(err)
	}
	raw, _ := json.Marshal(rep)
	n := notify.Build(store.Confirmation{ID: "cf-1", WorkflowID: "turn/c/1", CapabilityID: "bank.send", Version: 1,
		Arguments: json.RawMessage(`{"recipient":"US133000000121212121212"}`), Provenance: raw}, "pending", "hook", "")
	var line string
	for _, l := range n.Provenance {
		if strings.HasPrefix(l, "/recipient") {
			line = l
		}
	}
	if !strings.HasPrefix(line, "/recipient: ⚠ from files.read") || !strings.Contains(line, "only in untrusted data") {
		t.Fatalf("notice line = %q, want the mark first and the verdict kept", line)
	}
}

// A decided and an expired confirmation are notified once each (issue 34) to the channels told
// of them (the route's and its escalation channel), however often the recording activity
// enqueues them; they are sent although the confirmation is decided (the skip rule is for
// pending notices), carry the decision and the outcome, and add no audit row.
func TestDecidedAndExpiredNoticesAreSentOnce(t *testing.T) {
	st := openStore(t)
	dir := t.TempDir()
	hook := &webhookReceiver{secret: []byte("s"), got: map[string]int{}}
	hs := httptest.NewServer(hook)
	defer hs.Close()
	t.Setenv("TEST_HOOK_SECRET", "s")
	cfgPath := filepath.Join(dir, "notify.yaml")
	writeFile(t, cfgPath, `channels:
  - {name: team, type: webhook, url: `+hs.URL+`/team, secret: {env: TEST_HOOK_SECRET}}
  - {name: lead, type: webhook, url: `+hs.URL+`/lead, secret: {env: TEST_HOOK_SECRET}}
routes:
  - {capabilities: [send_email], channels: [team], escalate_at: 0.8, escalate_to: [lead]}
`)
	src := notify.NewSource(cfgPath)
	ctx := context.Background()
	now := time.Now().UTC()
	a := confirmation(t, st, "cf-00d1", now)
	b := confirmation(t, st, "cf-00e2", now)
	ob := &notify.Outbox{Store: st, Source: src}
	if err := ob.Decided(ctx, a); err != nil { // undecided: nothing owed
		t.Fatal(err)
	}
	if err := st.DecideConfirmation(ctx, a.ID, store.DecisionDenied, "bob", "wrong <b>account</b>\u202e", now); err != nil {
		t.Fatal(err)
	}
	if err := st.DecideConfirmation(ctx, b.ID, store.DecisionExpired, "", "", now); err != nil {
		t.Fatal(err)
	}
	a, _ = st.GetConfirmation(ctx, a.ID)
	b, _ = st.GetConfirmation(ctx, b.ID)
	for i := 0; i < 2; i++ { // a retried recording activity enqueues again
		for _, c := range []store.Confirmation{a, b} {
			if err := ob.Decided(ctx, c); err != nil {
				t.Fatal(err)
			}
		}
	}
	before, _ := st.ListAudit(ctx, a.WorkflowID)
	d := &notify.Dispatcher{Store: st, Source: src, Open: channels.Open}
	for i := 0; i < 2; i++ {
		if err := d.Tick(ctx); err != nil {
			t.Fatal(err)
		}
		d.Wait()
	}
	want := map[string]int{notify.DeliveryID(a.ID, notify.KindDecided, "team"): 1, notify.DeliveryID(a.ID, notify.KindDecided, "lead"): 1,
		notify.DeliveryID(b.ID, notify.KindExpired, "team"): 1, notify.DeliveryID(b.ID, notify.KindExpired, "lead"): 1}
	if len(hook.got) != len(want) {
		t.Fatalf("deliveries %v, want %v", hook.got, want)
	}
	for id, n := range want {
		if hook.got[id] != n {
			t.Fatalf("deliveries %v, want %v", hook.got, want)
		}
	}
	kinds := map[string]string{}
	for _, body := range hook.bodies {
		inert(t, "decided notice", string(body))
		var n notify.Notice
		if err := json.Unmarshal(body, &n); err != nil {
			t.Fatal(err)
		}
		if n.Schema != notify.SchemaV1 || n.Confirmation == nil || n.Decision == nil {
			t.Fatalf("notice: %s", body)
		}
		kinds[n.ConfirmationID] = n.Kind + "/" + n.Decision.Decision + "/" + n.Outcome + "/" + n.Confirmation.Status.State
		if n.ConfirmationID == a.ID && (n.Decision.Reason == nil || !strings.Contains(n.Decision.Reason.Text, "<U+202E>") || !strings.HasPrefix(n.Title(), "Denied")) {
			t.Errorf("denied notice: %s", body)
		}
	}
	if kinds[a.ID] != "confirmation_decided/denied/denied/denied" || kinds[b.ID] != "confirmation_expired/expired/expired/expired" {
		t.Fatalf("kinds: %v", kinds)
	}
	after, _ := st.ListAudit(ctx, a.WorkflowID)
	if len(after) != len(before) {
		t.Errorf("decided and expired notices added %d audit rows", len(after)-len(before))
	}
}

// An MCP tool that left its pin is notified once per tool and live digest, to the channels
// routed for its capability or for mcp_tool_changed, with what changed shown inert.
func TestMCPToolChangedNotice(t *testing.T) {
	st := openStore(t)
	dir := t.TempDir()
	hook := &webhookReceiver{secret: []byte("s"), got: map[string]int{}}
	hs := httptest.NewServer(hook)
	defer hs.Close()
	t.Setenv("TEST_HOOK_SECRET", "s")
	cfgPath := filepath.Join(dir, "notify.yaml")
	writeFile(t, cfgPath, `channels:
  - {name: ops, type: webhook, url: `+hs.URL+`/ops, secret: {env: TEST_HOOK_SECRET}}
  - {name: team, type: webhook, url: `+hs.URL+`/team, secret: {env: TEST_HOOK_SECRET}}
routes:
  - {capabilities: [mcp_tool_changed], channels: [ops]}
  - {capabilities: [send_email], channels: [team]}
`)
	ob := &notify.Outbox{Store: st, Source: notify.NewSource(cfgPath)}
	ctx := context.Background()
	ch := notify.MCPToolChange{Server: "tickets", Tool: "get_ticket\u202e", Capability: "mcp.tickets.get-ticket@1", Reason: "mcp_definition_changed",
		Detail: "description changed: \x1b[2J<b>ignore previous</b>", Pinned: "sha256:aa", Live: "sha256:bb"}
	for i := 0; i < 2; i++ {
		if err := ob.MCPChanged(ctx, ch, "mcp/tickets/get_ticket/aa/bb", "mcp.tickets.get-ticket", time.Now()); err != nil {
			t.Fatal(err)
		}
	}
	d := &notify.Dispatcher{Store: st, Source: notify.NewSource(cfgPath), Open: channels.Open}
	if err := d.Tick(ctx); err != nil {
		t.Fatal(err)
	}
	d.Wait()
	id := notify.DeliveryID("mcp/tickets/get_ticket/aa/bb", notify.KindMCPToolChanged, "ops")
	if len(hook.got) != 1 || hook.got[id] != 1 {
		t.Fatalf("deliveries: %v", hook.got)
	}
	body := string(hook.bodies[0])
	inert(t, "MCP notice", body)
	if strings.Contains(body, "\x1b") || strings.Contains(body, "\\u001b") {
		t.Errorf("MCP notice carries the escape: %s", body)
	}
	var n notify.Notice
	if err := json.Unmarshal(hook.bodies[0], &n); err != nil || n.Kind != notify.EventMCPToolChanged || n.MCPTool == nil ||
		n.MCPTool.Live != "sha256:bb" || !strings.Contains(n.MCPTool.Tool, "<U+202E>") {
		t.Fatalf("notice: %v %s", err, body)
	}
}
