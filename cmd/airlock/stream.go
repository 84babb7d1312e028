package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/spf13/cobra"

	"github.com/airlock-dev/airlock/internal/appapi"
	"github.com/airlock-dev/airlock/internal/stream"
)

func newStreamCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "stream",
		Short: "Follow a turn's events while it runs (AG-UI events over server-sent events)",
		Long: `A turn's events (text deltas, tool calls as the model streams them, confirmations pending
and decided, outcomes, run finished) are written to the Airlock store while the turn runs,
outside Temporal history. "airlock stream serve" serves them to client apps as server-sent
events; "airlock stream follow" prints them. docs/app-developers.md ("Streaming a turn") lists the events.`,
	}
	cmd.AddCommand(newStreamServeCmd(), newStreamFollowCmd())
	return cmd
}

func newStreamServeCmd() *cobra.Command {
	var addr, tokenFile string
	cmd := &cobra.Command{
		Use:   "serve",
		Short: "Serve turns' event streams to client apps (GET /v1/stream?turn=<workflow id>)",
		Long: `Serve GET /v1/stream?turn=<workflow id> as text/event-stream until interrupted. Each event
has "id: <n>" (resume with the Last-Event-ID header, as EventSource sends it, or ?after=<n>),
"event: <AG-UI type>" and "data: <the AG-UI event as JSON>". While confirmations are pending
and the turn is idle, a RUN_FINISHED event with outcome "interrupt" lists them (no id: it is
sent again after a reconnect). The response ends after RUN_FINISHED (success) or RUN_ERROR.

Every request needs "Authorization: Bearer <token>": the token is AIRLOCK_STREAM_TOKEN, or
the content of --token-file (AIRLOCK_STREAM_TOKEN_FILE). The events carry what the model
wrote and what approvers see: serve them over TLS (a proxy) beyond loopback.`,
		Example: `  AIRLOCK_STREAM_TOKEN=$(openssl rand -hex 16) airlock stream serve --addr 127.0.0.1:8091
  curl -N -H "Authorization: Bearer $AIRLOCK_STREAM_TOKEN" 'http://127.0.0.1:8091/v1/stream?turn=turn/demo/1'`,
		RunE: func(cmd *cobra.Command, _ []string) error {
			token, err := streamToken(tokenFile)
			if err != nil {
				return err
			}
			return runStreamServe(cmd.Context(), cmd.ErrOrStderr(), addr, token, nil)
		},
	}
	cmd.Flags().StringVar(&addr, "addr", envOr("AIRLOCK_STREAM_ADDR", "127.0.0.1:8091"), "listen address host:port (AIRLOCK_STREAM_ADDR)")
	cmd.Flags().StringVar(&tokenFile, "token-file", os.Getenv("AIRLOCK_STREAM_TOKEN_FILE"), "file holding the bearer token clients must send (AIRLOCK_STREAM_TOKEN_FILE; or set AIRLOCK_STREAM_TOKEN)")
	return cmd
}

// streamToken is the bearer token: AIRLOCK_STREAM_TOKEN, else the token file's content.
func streamToken(file string) (string, error) {
	if t := os.Getenv("AIRLOCK_STREAM_TOKEN"); t != "" {
		// The same strength floor as API keys (issue 32): a short token is refused at start.
		if err := appapi.CheckStrength("AIRLOCK_STREAM_TOKEN", t); err != nil {
			return "", err
		}
		return t, nil
	}
	if file == "" {
		return "", errors.New("no stream token: set AIRLOCK_STREAM_TOKEN or --token-file (AIRLOCK_STREAM_TOKEN_FILE); clients send it as Authorization: Bearer <token>")
	}
	b, err := os.ReadFile(file)
	if err != nil {
		return "", fmt.Errorf("--token-file: %w", err)
	}
	t := strings.TrimSpace(string(b))
	if err := appapi.CheckStrength("the token in --token-file "+file, t); err != nil {
		return "", err
	}
	return t, nil
}

// runStreamServe serves the stream endpoint on addr until ctx ends; ready, if set, receives
// the base URL once it listens.
func runStreamServe(ctx context.Context, errOut io.Writer, addr, token string, ready chan<- string) error {
	st, err := openExistingStore(ctx)
	if err != nil {
		return err
	}
	defer st.Close()
	mux := http.NewServeMux()
	mux.Handle("/v1/stream", stream.Handler(st, token, stream.DefaultPoll))
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return err
	}
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	url := "http://" + ln.Addr().String()
	fmt.Fprintf(errOut, "airlock stream: serving %s/v1/stream?turn=<workflow id>\n", url)
	if ready != nil {
		ready <- url
	}
	return serveUntil(ctx, srv, ln)
}

func newStreamFollowCmd() *cobra.Command {
	var after int64
	cmd := &cobra.Command{
		Use:   "follow TURN_ID",
		Short: "Print a turn's events as JSON lines until it finishes (non-ASCII escaped)",
		Args:  cobra.ExactArgs(1),
		Example: `  airlock stream follow turn/demo/1
  airlock stream follow turn/demo/1 --after 42`,
		RunE: func(cmd *cobra.Command, args []string) error {
			if after < 0 {
				return errors.New("--after must be a non-negative event id")
			}
			st, err := openExistingStore(cmd.Context())
			if err != nil {
				return err
			}
			defer st.Close()
			out := cmd.OutOrStdout()
			return stream.Follow(cmd.Context(), st, args[0], after, stream.DefaultPoll, func(d stream.Delivered) error {
				line, _ := json.Marshal(struct {
					ID   int64           `json:"id"`
					Type string          `json:"type"`
					Data json.RawMessage `json:"data"`
				}{d.Seq, d.Type, d.Payload})
				_, err := fmt.Fprintln(out, asciiJSON(line))
				return err
			})
		},
	}
	cmd.Flags().Int64Var(&after, "after", 0, "resume after this event id")
	return cmd
}

// asciiJSON escapes every non-ASCII character of a JSON text as \uXXXX, so what a model wrote
// (bidi overrides, invisible characters) cannot rearrange or hide anything on a terminal; the
// JSON means the same.
func asciiJSON(b []byte) string {
	var sb strings.Builder
	for len(b) > 0 {
		r, n := utf8.DecodeRune(b)
		b = b[n:]
		switch {
		case r < utf8.RuneSelf:
			sb.WriteRune(r)
		case r > 0xFFFF:
			r -= 0x10000
			fmt.Fprintf(&sb, `\u%04x\u%04x`, 0xD800+(r>>10), 0xDC00+(r&0x3FF))
		default:
			fmt.Fprintf(&sb, `\u%04x`, r)
		}
	}
	return sb.String()
}
