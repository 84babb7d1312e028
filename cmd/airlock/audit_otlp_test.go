package main

import (
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"sync"
	"testing"

	collogspb "go.opentelemetry.io/proto/otlp/collector/logs/v1"
	"google.golang.org/protobuf/proto"

	"github.com/airlock-dev/airlock/internal/receipts"
)

// `airlock audit export --siem --otlp` sends each record as an OTLP log record to the
// exporter the standard variables configure: a real OTLP/HTTP receiver gets every record,
// its body the record's bytes, its attributes the index, event, type and signature.
func TestAuditExportSIEMOverOTLP(t *testing.T) {
	type got struct {
		body, event, typ string
		index            int64
		signed           bool
		service          string
	}
	var mu sync.Mutex
	var logs []got
	collector := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/v1/logs" {
			http.NotFound(w, r)
			return
		}
		b, _ := io.ReadAll(r.Body)
		var req collogspb.ExportLogsServiceRequest
		if err := proto.Unmarshal(b, &req); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		mu.Lock()
		for _, rl := range req.GetResourceLogs() {
			service := ""
			for _, a := range rl.GetResource().GetAttributes() {
				if a.GetKey() == "service.name" {
					service = a.GetValue().GetStringValue()
				}
			}
			for _, sl := range rl.GetScopeLogs() {
				for _, lr := range sl.GetLogRecords() {
					g := got{body: lr.GetBody().GetStringValue(), service: service}
					for _, a := range lr.GetAttributes() {
						switch a.GetKey() {
						case "airlock.receipt.index":
							g.index = a.GetValue().GetIntValue()
						case "airlock.receipt.event":
							g.event = a.GetValue().GetStringValue()
						case "airlock.receipt.type":
							g.typ = a.GetValue().GetStringValue()
						case "airlock.receipt.signed":
							g.signed = a.GetValue().GetBoolValue()
						}
					}
					logs = append(logs, g)
				}
			}
		}
		mu.Unlock()
		w.Header().Set("Content-Type", "application/x-protobuf")
		out, _ := proto.Marshal(&collogspb.ExportLogsServiceResponse{})
		w.Write(out)
	}))
	defer collector.Close()

	home := t.TempDir()
	db := "sqlite:" + filepath.Join(home, "airlock.db")
	appendRows(t, home, db, 0, 3) // 6 records
	if _, err := run(t, "", "audit", "export", "--otlp", "--home", home, "--database-url", db); err == nil {
		t.Fatal("--otlp without --siem was accepted")
	}
	t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", collector.URL)
	if out, err := run(t, "", "audit", "export", "--siem", "--otlp", "--from", "2", "--home", home, "--database-url", db); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(logs) != 4 {
		t.Fatalf("the collector got %d log records, want 4 (records 2 to 5): %+v", len(logs), logs)
	}
	for i, g := range logs {
		rec, err := receipts.ParseRecord([]byte(g.body))
		if err != nil || g.index != int64(i+2) || g.event != rec.Event || g.typ != rec.Type || !g.signed || g.service != "airlock" {
			t.Fatalf("log record %d: %+v (%v)", i, g, err)
		}
	}
}
