package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"go.opentelemetry.io/otel/attribute"
	otellog "go.opentelemetry.io/otel/log"

	"github.com/airlock-dev/airlock/internal/privfile"
	"github.com/airlock-dev/airlock/internal/receipts"
	"github.com/airlock-dev/airlock/internal/store"
)

// Receipts (issue 36): `airlock audit export | verify | checkpoint | rotate-key`.

func addReceiptCmds(audit *cobra.Command) {
	audit.AddCommand(newAuditExportCmd(), newAuditVerifyCmd(), newAuditCheckpointCmd(), newAuditRotateKeyCmd())
}

// storeWithKey opens the store and gives it the log key of the Airlock home, when there is one.
func storeWithKey(cmd *cobra.Command) (*store.Store, error) {
	st, err := openExistingStore(cmd.Context())
	if err != nil {
		return nil, err
	}
	sg, err := receipts.LoadKey(cfg.Home)
	switch {
	case errors.Is(err, receipts.ErrNoKey):
	case err != nil:
		st.Close()
		return nil, err
	default:
		st.UseReceiptKey(sg)
	}
	return st, nil
}

func newAuditExportCmd() *cobra.Command {
	var out string
	var sign, siem, follow, otlp bool
	var from uint64
	cmd := &cobra.Command{
		Use:   "export [--out FILE] | --siem [--from N] [--follow]",
		Short: "Write the receipts log as JSON lines: every record with its inclusion proof and signed checkpoint, and the kept checkpoints",
		Long: `Write the receipts log (every authorization and settlement record, each with its RFC 6962
inclusion proof and the signed checkpoint of the tree that ends with it) and the checkpoints
kept beside it, one JSON object a line, to FILE (owner-only, written atomically) or standard
output. With the log key in AIRLOCK_HOME (--sign, the default), the head is signed first, so
the export ends with a checkpoint covering every record. Check it anywhere with
airlock audit verify FILE --key receipts.pub.

With --siem it writes, to standard output, one JSON object a record for a SIEM (time,
source "airlock.receipts", index, event, type, signed, and the record unchanged), from record
--from on, and with --follow keeps writing new records as they are appended (polled every
second) until interrupted. With --otlp each goes as an OTLP log record (body: the record;
attributes airlock.receipt.index, .event, .type, .signed; time: the record's) to the
OpenTelemetry exporter the standard OTEL_EXPORTER_OTLP_* variables configure.`,
		Example: "  airlock audit export --out receipts.jsonl",
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			st, err := storeWithKey(cmd)
			if err != nil {
				return err
			}
			defer st.Close()
			if otlp && !siem {
				return errors.New("audit export: --otlp ships the --siem form: pass both")
			}
			if siem {
				return siemExport(cmd, st, from, follow, otlp)
			}
			if sign && st.ReceiptKey() != nil {
				if _, err := st.SignReceiptHead(cmd.Context()); err != nil {
					return err
				}
			}
			var buf bytes.Buffer
			w := io.Writer(cmd.OutOrStdout())
			if out != "" {
				w = &buf
			}
			if err := st.ExportReceipts(cmd.Context(), receipts.NewWriter(w)); err != nil {
				return err
			}
			if out == "" {
				return nil
			}
			if err := privfile.Replace(out, ".receipts-export-*", buf.Bytes()); err != nil {
				return fmt.Errorf("audit export: write %s: %w", out, err)
			}
			h, _ := st.ReceiptHead(cmd.Context())
			fmt.Fprintf(cmd.ErrOrStderr(), "wrote %d records to %s\n", h.Size, out)
			return nil
		},
	}
	cmd.Flags().StringVar(&out, "out", "", "write to this file instead of standard output")
	cmd.Flags().BoolVar(&sign, "sign", true, "sign the log's head first with the log key in AIRLOCK_HOME (when it is there)")
	cmd.Flags().BoolVar(&siem, "siem", false, "write one line a record for a SIEM to standard output (time, index, event, type, the record), no proofs")
	cmd.Flags().Uint64Var(&from, "from", 0, "with --siem: start at this record index (the next one a shipper has not sent)")
	cmd.Flags().BoolVar(&follow, "follow", false, "with --siem: keep writing records as they are appended, until interrupted")
	cmd.Flags().BoolVar(&otlp, "otlp", false, "with --siem: send each record as an OTLP log record to the exporter OTEL_EXPORTER_OTLP_(LOGS_)ENDPOINT configures, instead of standard output")
	return cmd
}

func newAuditVerifyCmd() *cobra.Command {
	var keyFile string
	var checkpoints []string
	var each bool
	cmd := &cobra.Command{
		Use:   "verify EXPORT --key PUBLIC-KEYS [--checkpoint FILE]...",
		Short: "Check an export offline with the log's public keys: signatures, proofs, order, and consistency with older checkpoints",
		Long: `Check an export of the receipts log (airlock audit export) without Airlock's database:
every record's own signed checkpoint and RFC 6962 inclusion proof, that indices run 0, 1, 2…
with none missing, moved or inserted, that the records before each signed record are the
ones its checkpoint commits to, and that every checkpoint in the export or given with
--checkpoint (a file of notes, as airlock audit checkpoint --publish appends them) is
consistent with the records: an older checkpoint must have the root of the first records, a
checkpoint larger than the export shows its tail was cut. Each problem names its record.
When a signed checkpoint of the whole export matches, it proves every record, and the
records' own signatures are checked only with --each-record (a million records: seconds
instead of about two minutes on two cores).
PUBLIC-KEYS is receipts.pub from AIRLOCK_HOME: every key the log ever signed with. Exit
status 1 when the export does not verify. EXPORT "-" reads standard input.`,
		Example: "  airlock audit verify receipts.jsonl --key receipts.pub --checkpoint published.txt",
		Args:    cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if keyFile == "" {
				keyFile = filepath.Join(cfg.Home, receipts.PublicFile)
			}
			keys, err := receipts.LoadKeyring(keyFile)
			if err != nil {
				return err
			}
			var opt receipts.VerifyOptions
			for _, f := range checkpoints {
				b, err := os.ReadFile(f)
				if err != nil {
					return fmt.Errorf("audit verify: %w", err)
				}
				notes := receipts.ReadCheckpoints(b)
				if len(notes) == 0 {
					return fmt.Errorf("audit verify: %s holds no checkpoint", f)
				}
				opt.Checkpoints = append(opt.Checkpoints, notes...)
			}
			in := io.Reader(cmd.InOrStdin())
			if args[0] != "-" {
				f, err := os.Open(args[0])
				if err != nil {
					return fmt.Errorf("audit verify: %w", err)
				}
				defer f.Close()
				in = f
			}
			opt.EachRecord = each
			rep, err := receipts.Verify(in, keys, opt)
			if errors.Is(err, receipts.ErrTampered) {
				fmt.Fprintln(cmd.OutOrStdout(), err)
				return errVerifyFailed
			}
			if err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "verified: %d records; %d checkpoints consistent with them; %d records checked by their own signature; keys %s; root %x\n",
				rep.Records, rep.Checkpoints, rep.Signed, strings.Join(rep.Keys, ", "), rep.Root)
			return nil
		},
	}
	cmd.Flags().StringVar(&keyFile, "key", "", "file of verifier keys, one a line (default: receipts.pub in AIRLOCK_HOME)")
	cmd.Flags().StringArrayVar(&checkpoints, "checkpoint", nil, "a file of checkpoints kept elsewhere (repeatable): each must be consistent with the export")
	cmd.Flags().BoolVar(&each, "each-record", false, "check every record's own signed checkpoint and proof even when a checkpoint of the whole export proves them all")
	return cmd
}

// errVerifyFailed is the exit of a verify that found problems (printed already).
var errVerifyFailed = errors.New("audit verify: the export does not verify")

func newAuditCheckpointCmd() *cobra.Command {
	var publish []string
	cmd := &cobra.Command{
		Use:   "checkpoint [--publish FILE|URL]...",
		Short: "Sign the receipts log's head now, keep it, print it and publish it (a file it is appended to, or a webhook it is POSTed to)",
		Long: `Sign the checkpoint of the receipts log as it stands with the log key in AIRLOCK_HOME
(C2SP tlog-checkpoint, a signed note), keep it in the store and print it. Every --publish
destination gets it: a path is appended to, an http(s) URL gets it POSTed as text/plain.
Published checkpoints are what shows a cut tail: hand them to someone who keeps them.`,
		Example: "  airlock audit checkpoint --publish /srv/receipts/checkpoints.txt --publish https://witness.example/airlock",
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			st, err := storeWithKey(cmd)
			if err != nil {
				return err
			}
			defer st.Close()
			note, err := st.SignReceiptHead(cmd.Context())
			if errors.Is(err, store.ErrNoReceiptKey) {
				return fmt.Errorf("audit checkpoint: no log key in %s (a worker creates %s)", cfg.Home, receipts.KeyFile)
			}
			if err != nil {
				return err
			}
			for _, d := range publish {
				if err := receipts.Publish(cmd.Context(), d, note); err != nil {
					return err
				}
			}
			_, err = cmd.OutOrStdout().Write(note)
			return err
		},
	}
	cmd.Flags().StringArrayVar(&publish, "publish", nil, "a file to append the checkpoint to, or an http(s) URL to POST it to (repeatable)")
	return cmd
}

func newAuditRotateKeyCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "rotate-key",
		Short: "Replace the receipts log key; the old public key stays in receipts.pub, and the head is signed by both",
		Long: `Make a new log key (same origin) in AIRLOCK_HOME, add its public key to receipts.pub (which
keeps every older one, so checkpoints signed before still verify) and sign the log's head
with the old and the new key together: that checkpoint hands the log over from one key to the
next. Restart the workers afterwards so they sign with the new key.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			st, err := openExistingStore(cmd.Context())
			if err != nil {
				return err
			}
			defer st.Close()
			old, next, err := receipts.RotateKey(cfg.Home)
			if err != nil {
				return err
			}
			st.UseReceiptKey(next)
			note, err := st.SignReceiptHead(cmd.Context(), old)
			if err != nil {
				return err
			}
			fmt.Fprintf(cmd.ErrOrStderr(), "the log key is now %s+%s (was %s); restart the workers\n", next.Origin(), next.KeyID(), old.KeyID())
			_, err = cmd.OutOrStdout().Write(note)
			return err
		},
	}
}

// siemExport writes records from index from on as SIEM lines (or, with otlp, OTLP log
// records); with follow it polls for new ones every second until the command's context ends.
func siemExport(cmd *cobra.Command, st *store.Store, from uint64, follow, otlp bool) error {
	ctx := cmd.Context()
	w := receipts.NewWriter(cmd.OutOrStdout())
	emit, flush := w.SIEM, w.Flush
	if otlp {
		logger, flushLogs, err := otlpLogs(ctx, "airlock", receipts.SIEMSource)
		if err != nil {
			return err
		}
		emit = func(r receipts.Receipt) error { return emitOTLP(ctx, logger, r) }
		flush = func() error { return flushLogs(context.WithoutCancel(ctx)) }
	}
	next := from
	for {
		// Records written but not yet placed in the tree are placed first (signed when the
		// log key is in AIRLOCK_HOME), so a shipper never waits for a worker's sequencer.
		if _, err := st.SequenceReceipts(ctx); err != nil {
			return err
		}
		err := st.EachReceipt(ctx, next, func(r receipts.Receipt) error {
			next = r.Index + 1
			return emit(r)
		})
		if err != nil {
			return err
		}
		if err := flush(); err != nil {
			return err
		}
		if !follow {
			return nil
		}
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(time.Second):
		}
	}
}

// emitOTLP sends one record as an OTLP log record: its time, INFO, the record as the body,
// and its index, event, type and whether it is signed as attributes.
func emitOTLP(ctx context.Context, logger otellog.Logger, r receipts.Receipt) error {
	rec, err := receipts.ParseRecord(r.Leaf)
	if err != nil {
		return fmt.Errorf("audit export: record %d: %w", r.Index, err)
	}
	var lr otellog.Record
	lr.SetTimestamp(rec.At)
	lr.SetObservedTimestamp(time.Now())
	lr.SetSeverity(otellog.SeverityInfo)
	lr.SetSeverityText("INFO")
	lr.SetEventName("airlock.receipt." + rec.Type)
	lr.SetBody(attribute.StringValue(string(r.Leaf)))
	lr.AddAttributes(attribute.Int64("airlock.receipt.index", int64(r.Index)), attribute.String("airlock.receipt.event", r.Event),
		attribute.String("airlock.receipt.type", rec.Type), attribute.Bool("airlock.receipt.signed", len(r.Checkpoint) > 0))
	logger.Emit(ctx, lr)
	return nil
}
