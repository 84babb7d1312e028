#!/usr/bin/env bash
# bench-compare.sh — run Airlock's reference workload beside its peers in one run and write the
# comparison to docs/bench/<date>.md (raw JSON lines in docs/bench/<date>.jsonl).
#
#   1. copies the peer benchmarks ($BENCH_DIR, default ../shared/bench: read-only) to a temp dir;
#   2. LangGraph.js (langgraph/run.sh: npm ci, role/database lgbench on 127.0.0.1:5432 created
#      through `su postgres`), N turns at C in flight, plain and approval; then C1_N turns at 1
#      in flight of each;
#   3. bare Temporal (bare-temporal/run.sh on its own dev server on port $PORT, started with the
#      flags airlock stack gives its dev server: `airlock bench --server-args`), variants plain,
#      approval, plain-local, approval-local; then the same at 1 in flight;
#   4. airlock bench (both classes, both variants: -n N -c C --c1-n C1_N);
#   5. steps 2-4 again, ROUNDS times in all, every other round in the reverse order (Airlock,
#      bare, LangGraph.js), each round's lines after a "# round K" line;
#   6. airlock bench report: the markdown table: medians over the rounds, each ratio to
#      LangGraph.js the median of the rounds' own ratios (with their range), and the targets.
#
# Environment: N (200), C (16), C1_N (50), ROUNDS (3), PORT (7299), BENCH_DIR, AIRLOCK_TEST_DATABASE_URL
# (default: scripts/ensure-postgres.sh), OUT_DIR (docs/bench), DATE (UTC date).
# Run from the repository (make bench-compare builds bin/airlock and bin/temporal first).
set -euo pipefail
cd "$(dirname "$0")/.."
repo=$(pwd)

N=${N:-200}
C=${C:-16}
C1_N=${C1_N:-50}
ROUNDS=${ROUNDS:-3}
PORT=${PORT:-7299}
BENCH_DIR=${BENCH_DIR:-$repo/../shared/bench}
OUT_DIR=${OUT_DIR:-$repo/docs/bench}
DATE=${DATE:-$(date -u +%F)}
AIRLOCK=$repo/bin/airlock
TEMPORAL=$repo/bin/temporal

say() { echo "bench-compare: $*" >&2; }
# Sizes are whole numbers; C above 1, because the report tells a peer's 1-in-flight run from
# its main run by its concurrency.
for v in N C C1_N ROUNDS; do
  [[ ${!v} =~ ^[1-9][0-9]*$ ]] || { say "$v must be a whole number above 0 (got '${!v}')"; exit 2; }
done
[ "$C" -gt 1 ] || { say "C must be above 1 (the C=1 runs are C1_N's)"; exit 2; }
[ -x "$AIRLOCK" ] && [ -x "$TEMPORAL" ] || { say "build bin/airlock and bin/temporal first (make build temporal)"; exit 1; }
[ -d "$BENCH_DIR/langgraph" ] && [ -d "$BENCH_DIR/bare-temporal" ] || { say "no peer benchmarks under $BENCH_DIR (set BENCH_DIR)"; exit 1; }
url="${AIRLOCK_TEST_DATABASE_URL:-$(scripts/ensure-postgres.sh)}"

tmp=$(mktemp -d -t airlock-bench-compare.XXXXXX)
trap 'rm -rf "$tmp"' EXIT
cp -r "$BENCH_DIR/langgraph" "$BENCH_DIR/bare-temporal" "$tmp"/
mkdir -p "$OUT_DIR"
raw=$tmp/raw.jsonl
: >"$raw"
load() { cut -d' ' -f1-3 /proc/loadavg; }
load_before=$(load)
say "load average before: $load_before (2 cores: other work on the machine skews every number)"
phases=""
# phase LABEL MESSAGE: announce a phase and note the 1-minute load as it starts.
phase() { phases="$phases $1 $(load | cut -d' ' -f1),"; say "$2 (load $(load))"; }

server_args=$("$AIRLOCK" bench --server-args)
langgraph() {
  phase langgraph "round $1: LangGraph.js: n=$N c=$C, plain and approval"
  "$tmp/langgraph/run.sh" -n "$N" -c "$C" | tee -a "$raw"
  phase langgraph-c1 "round $1: LangGraph.js: n=$C1_N c=1, plain and approval"
  (cd "$tmp/langgraph" && node bench.mjs --truncate -n "$C1_N" -c 1 && node bench.mjs --truncate -n "$C1_N" -c 1 --approval) | tee -a "$raw"
}
bare() {
  phase bare-temporal "round $1: bare Temporal: n=$N c=$C"
  TEMPORAL=$TEMPORAL SERVER_EXTRA_ARGS="$server_args" PORT=$PORT N=$N C=$C \
    BENCH_VARIANTS="plain approval plain-local approval-local" "$tmp/bare-temporal/run.sh" | tee -a "$raw"
  phase bare-temporal-c1 "round $1: bare Temporal: n=$C1_N c=1"
  TEMPORAL=$TEMPORAL SERVER_EXTRA_ARGS="$server_args" PORT=$PORT N=$C1_N C=1 \
    BENCH_VARIANTS="plain approval plain-local approval-local" "$tmp/bare-temporal/run.sh" | tee -a "$raw"
}
airlock() {
  phase airlock "round $1: airlock bench: n=$N c=$C, c1-n=$C1_N"
  AIRLOCK_TEST_DATABASE_URL=$url "$AIRLOCK" bench -n "$N" -c "$C" --c1-n "$C1_N" | tee -a "$raw"
}
# Rounds alternate the order (LangGraph.js, bare, Airlock; then Airlock, bare, LangGraph.js), so
# a drift in the machine's load over the run weighs on every system alike.
for r in $(seq 1 "$ROUNDS"); do
  echo "# round $r" >>"$raw"
  phases="$phases round $r:"
  if [ $((r % 2)) -eq 1 ]; then
    langgraph "$r"; bare "$r"; airlock "$r"
  else
    airlock "$r"; bare "$r"; langgraph "$r"
  fi
done

load_after=$(load)
commit=$(git rev-parse --short HEAD 2>/dev/null || echo unknown)
note="Run on $(date -u '+%F %H:%M UTC'), $(nproc) cores, commit $commit$(git diff --quiet 2>/dev/null || echo ' (with uncommitted changes)'); load average before $load_before, after $load_after; 1-minute load at the start of each phase:${phases%,}. $ROUNDS rounds; in each, N=$N turns at C=$C in flight and C=1 runs of $C1_N turns. All Temporal systems on dev servers started with: \`$server_args\`. Produced by \`make bench-compare\` (scripts/bench-compare.sh); see docs/bench/README.md."
cp "$raw" "$OUT_DIR/$DATE.jsonl"
"$AIRLOCK" bench report "$OUT_DIR/$DATE.jsonl" --title "Airlock beside LangGraph.js and bare Temporal, $DATE" --note "$note" >"$OUT_DIR/$DATE.md"
say "wrote $OUT_DIR/$DATE.md and $OUT_DIR/$DATE.jsonl"
cat "$OUT_DIR/$DATE.md"
