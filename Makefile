# Airlock: the two commands that matter are `make run` (a real turn, end to end, on the local
# stack) and `make test` (every test, against real PostgreSQL and a real Temporal dev server).
SHELL := bash
GO ?= go
BIN := $(abspath bin)
AIRLOCK := $(BIN)/airlock
TEMPORAL := $(BIN)/temporal
TEMPORAL_VERSION := v1.5.1
WORKFLOWCHECK := $(BIN)/workflowcheck
WORKFLOWCHECK_VERSION := v0.6.0
STATICCHECK := $(BIN)/staticcheck
STATICCHECK_VERSION := v0.8.2
TEST_TIMEOUT ?= 45m
TEMPORAL_SERVER_VERSION := v1.29.1
TEMPORAL_UI_SERVER_VERSION := v2.42.1
TEMPORAL_SERVER := $(BIN)/temporal-server
TEMPORAL_SQL_TOOL := $(BIN)/temporal-sql-tool
TEMPORAL_UI_SERVER := $(BIN)/temporal-ui-server

.PHONY: run test build temporal stop check race bench bench-go bench-compare bench-scale chaos histories eval clean help cluster cluster-bin cluster-down test-cluster

help: ## list targets
	@grep -E '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | sed 's/:.*## /\t/'

run: build temporal ## bring up Temporal, run a worker and replay a real recorded turn end to end
	$(AIRLOCK) dev

build: ## build bin/airlock
	@echo "› building bin/airlock"
	$(GO) build -o $(AIRLOCK) ./cmd/airlock

temporal: $(TEMPORAL) ## build the Temporal CLI into bin/ (once)

$(TEMPORAL):
	@echo "› building the Temporal CLI $(TEMPORAL_VERSION) into bin/ with go install (once: about 6 minutes on 2 cores with an empty Go build cache, under 30 seconds with a warm one)"
	GOBIN=$(BIN) $(GO) install github.com/temporalio/cli/cmd/temporal@$(TEMPORAL_VERSION)

check: $(WORKFLOWCHECK) $(STATICCHECK) ## gofmt, go vet, staticcheck, workflowcheck (determinism of workflow code) and the registry projection's drift check
	@out=$$(gofmt -l $$(git ls-files '*.go')); if [ -n "$$out" ]; then echo "gofmt would change: $$out"; exit 1; fi
	$(GO) vet ./...
	$(STATICCHECK) ./...
	$(WORKFLOWCHECK) ./workflows/...
	@echo "› examples/ticketworker, a module of its own on the public API: vet, and go.mod/go.sum tidy (after a dependency change: cd examples/ticketworker && go mod tidy)"
	cd examples/ticketworker && $(GO) vet ./... && $(GO) mod tidy -diff
	@echo "› docs/CAPABILITY-REGISTRY.md matches the registry and its policy sidecars (regenerate: airlock registry doc)"
	$(GO) test -count=1 -run '^(TestCapabilityRegistryDocIsCurrent|TestEmbeddedLayerPoliciesAreGenerated|TestEachRuleHasAFixtureThatFailsWithItsOwnRule)$$' ./registry/
	@echo "› docs/configuration.md matches the settings table (regenerate: airlock config doc)"
	$(GO) test -count=1 -run '^TestConfigurationReferenceIsCurrent$$' ./internal/config/

$(STATICCHECK):
	@echo "› building staticcheck $(STATICCHECK_VERSION) into bin/ (once)"
	GOBIN=$(BIN) $(GO) install honnef.co/go/tools/cmd/staticcheck@$(STATICCHECK_VERSION)

$(WORKFLOWCHECK):
	@echo "› building workflowcheck $(WORKFLOWCHECK_VERSION) into bin/ (once)"
	GOBIN=$(BIN) $(GO) install go.temporal.io/sdk/contrib/tools/workflowcheck@$(WORKFLOWCHECK_VERSION)

test: check build temporal ## every test: unit, workflow (testsuite) and integration (PostgreSQL + Temporal dev server)
	@echo "› making Chromium available for the approver page's browser tests (scripts/ensure-chromium.sh)"
	@scripts/ensure-chromium.sh >/dev/null
	@echo "› making the npm MCP servers available for the MCP bridge's tests (scripts/ensure-mcp-servers.sh → bin/npm)"
	@scripts/ensure-mcp-servers.sh >/dev/null
	@[ -n "$${AIRLOCK_TEST_DATABASE_URL:-}" ] || echo "› making PostgreSQL available (scripts/ensure-postgres.sh)"
	@url="$${AIRLOCK_TEST_DATABASE_URL:-$$(scripts/ensure-postgres.sh)}" && \
	  echo "› go test ./... (integration tests start their own Temporal dev server from bin/temporal)" && \
	  AIRLOCK_REQUIRE_BROWSER=1 AIRLOCK_REQUIRE_MCP=1 AIRLOCK_TEST_DATABASE_URL="$$url" $(GO) test -count=1 -timeout $(TEST_TIMEOUT) ./...

race: build temporal ## the tests under the race detector (slow)
	@url="$${AIRLOCK_TEST_DATABASE_URL:-$$(scripts/ensure-postgres.sh)}" && \
	  AIRLOCK_TEST_DATABASE_URL="$$url" $(GO) test -race -count=1 -timeout 60m ./...

bench: build temporal ## the reference workload (issue 12) with airlock bench: recorded and network models, plain and approval, on a throwaway dev server per row and PostgreSQL; JSON lines on stdout, a table on stderr
	@url="$${AIRLOCK_TEST_DATABASE_URL:-$$(scripts/ensure-postgres.sh)}" && \
	  AIRLOCK_TEST_DATABASE_URL="$$url" $(AIRLOCK) bench --class recorded,network --variant plain,approval

bench-go: build temporal ## the go test benchmarks (turn throughput, evaluation replay) on the real dev server
	@url="$${AIRLOCK_TEST_DATABASE_URL:-$$(scripts/ensure-postgres.sh)}" && \
	  AIRLOCK_TEST_DATABASE_URL="$$url" $(GO) test -run '^$$' -bench . -benchtime 128x ./integration/

SCALE_LOG ?= .airlock/bench-scale.log

bench-scale: build temporal ## scale: 10,000 turns waiting for confirmation on one worker process (RSS, pending-list latency) and a 500-turn conversation; about 9 minutes on 2 cores; log in $(SCALE_LOG) (docs/bench/scale.md)
	@mkdir -p $(dir $(SCALE_LOG))
	@set -o pipefail; url="$${AIRLOCK_TEST_DATABASE_URL:-$$(scripts/ensure-postgres.sh)}" && \
	  AIRLOCK_TEST_DATABASE_URL="$$url" $(GO) test -tags scale -count=1 -timeout 90m -v -run '^TestScale' ./integration/ 2>&1 | \
	  grep --line-buffered -v -e '^=== ' -e 'history of ' | tee $(abspath $(SCALE_LOG))

bench-compare: build temporal ## airlock bench beside LangGraph.js and bare Temporal (../shared/bench, or BENCH_DIR) in one run of ROUNDS interleaved rounds (3); writes docs/bench/<date>.md and .jsonl (about 5 minutes a round)
	scripts/bench-compare.sh

CHAOS_JSON ?= .airlock/chaos-report.json

chaos: build temporal ## the full chaos harness: 200 turns, SIGKILLed workers, a Temporal and a PostgreSQL restart; table on stdout, JSON in $(CHAOS_JSON) (seed: AIRLOCK_CHAOS_SEED)
	@mkdir -p $(dir $(CHAOS_JSON))
	@url="$${AIRLOCK_TEST_DATABASE_URL:-$$(scripts/ensure-postgres.sh)}" && \
	  AIRLOCK_TEST_DATABASE_URL="$$url" $(GO) test -count=1 -timeout 90m -v -run '^TestChaos$$' ./integration/ \
	    -chaos.full -chaos.json $(abspath $(CHAOS_JSON))

EVAL_DIR ?= docs/eval/$(shell date -u +%F)

eval: build temporal ## the full evaluation: every recorded AgentDojo trace and tau-bench trajectory under deny-all and approve-all, with the structural and the user-provided (provenance) policy; reports in docs/eval/<date>/
	@mkdir -p $(EVAL_DIR)
	@for autonomy in structural user-provided; do \
	  suffix=$$( [ $$autonomy = structural ] || echo -$$autonomy ); \
	  for policy in deny-all approve-all; do \
	    for bench in agentdojo tau-bench; do \
	      echo "› airlock eval $$bench --approver $$policy --autonomy $$autonomy → $(EVAL_DIR)/$$bench-$$policy$$suffix.{txt,json}"; \
	      $(AIRLOCK) eval $$bench --approver $$policy --autonomy $$autonomy --quiet --out $(EVAL_DIR)/$$bench-$$policy$$suffix.txt \
	        --json-out $(EVAL_DIR)/$$bench-$$policy$$suffix.json > /dev/null || exit 1; \
	    done; \
	  done; \
	done
	@head -n 1 $(EVAL_DIR)/*.txt

cluster-bin: $(TEMPORAL_SERVER) $(TEMPORAL_SQL_TOOL) $(TEMPORAL_UI_SERVER) ## build the Temporal server, its schema tool and UI server into bin/ (once)

# go install names a binary after its package folder (server, sql): each is built in a private
# GOBIN and renamed, so the three never overwrite each other.
$(TEMPORAL_SERVER):
	@echo "› building the Temporal server $(TEMPORAL_SERVER_VERSION) into bin/ (once: about 4 minutes with a warm module cache)"
	@tmp=$$(mktemp -d) && GOBIN=$$tmp $(GO) install go.temporal.io/server/cmd/server@$(TEMPORAL_SERVER_VERSION) && mv $$tmp/server $@ && rmdir $$tmp

$(TEMPORAL_SQL_TOOL):
	@echo "› building the Temporal schema tool $(TEMPORAL_SERVER_VERSION) into bin/ (once)"
	@tmp=$$(mktemp -d) && GOBIN=$$tmp $(GO) install go.temporal.io/server/cmd/tools/sql@$(TEMPORAL_SERVER_VERSION) && mv $$tmp/sql $@ && rmdir $$tmp

$(TEMPORAL_UI_SERVER):
	@echo "› building the Temporal UI server $(TEMPORAL_UI_SERVER_VERSION) (UI assets embedded) into bin/ (once)"
	@tmp=$$(mktemp -d) && GOBIN=$$tmp $(GO) install github.com/temporalio/ui-server/v2/cmd/server@$(TEMPORAL_UI_SERVER_VERSION) && mv $$tmp/server $@ && rmdir $$tmp

cluster: build cluster-bin ## the production topology on this machine: Temporal server on PostgreSQL 15 (4 services as processes), its UI, 2 workers, the approver page
	@scripts/ensure-cluster-postgres.sh >/dev/null
	$(AIRLOCK) cluster up

cluster-down: ## stop the local cluster (keeps its databases)
	-$(AIRLOCK) cluster down

CLUSTER_TURNS ?= 200

test-cluster: build cluster-bin ## the cluster tests: turns with automatic and confirmed calls on a private cluster while a worker is SIGKILLed and history restarted; the Temporal UI decoding through the codec server (Chromium)
	@scripts/ensure-cluster-postgres.sh >/dev/null
	@scripts/ensure-chromium.sh >/dev/null
	@url="$${AIRLOCK_TEST_DATABASE_URL:-$$(scripts/ensure-postgres.sh)}" && \
	  AIRLOCK_REQUIRE_BROWSER=1 AIRLOCK_TEST_DATABASE_URL="$$url" $(GO) test -tags cluster -count=1 -timeout 40m -v \
	    -run '^(TestCluster|TestTemporalUIDecodesThroughCodecServer)$$' ./integration/ -cluster.turns $(CLUSTER_TURNS)

stop: ## stop the detached local Temporal dev server
	-$(AIRLOCK) stack down

clean: stop cluster-down ## remove local state (.airlock/) and bin/airlock (keeps bin/temporal)
	rm -rf .airlock $(AIRLOCK)

# Every committed history, recorded from the real dev server with the current workflow code. A
# turn is Pinned to its build (Worker Versioning): re-record after a change that does not replay.
HISTORIES ?= TestMixedTurnHistory|TestReplayedSessionHistory|TestDecisionProtocolHistory|TestBatchEditHistory|TestMCPServeGoClient

histories: build temporal ## re-record every history in workflows/testdata from the real dev server (after a change of TurnWorkflow that does not replay them)
	@url="$${AIRLOCK_TEST_DATABASE_URL:-$$(scripts/ensure-postgres.sh)}" && \
	  AIRLOCK_WRITE_HISTORIES=1 AIRLOCK_TEST_DATABASE_URL="$$url" $(GO) test -count=1 -run '^($(HISTORIES))$$' ./integration/
