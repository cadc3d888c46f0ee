# Fleet Manager. `make help` lists the targets.

SHELL := /usr/bin/env bash
.DEFAULT_GOAL := help

BINARY      ?= bin/fleet-manager
VERSION     ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
COMMIT      ?= $(shell git rev-parse --short HEAD 2>/dev/null || echo unknown)
LDFLAGS     := -X github.com/fleetmanager/fleet-manager/internal/version.Version=$(VERSION) \
               -X github.com/fleetmanager/fleet-manager/internal/version.Commit=$(COMMIT)

# The local database `make run` and `make db/setup` use.
DB_HOST     ?= 127.0.0.1
DB_PORT     ?= 5432
DB_USER     ?= postgres
DB_NAME     ?= fleet_manager
export DB_HOST DB_PORT DB_USER DB_NAME

# What `make run` serves with: a development signing key under .local/auth
# (created on first run; `bin/fleet-manager token` mints tokens for it).
DB_FLAGS    ?= --log-format=text --db-host=$(DB_HOST) --db-port=$(DB_PORT) --db-user=$(DB_USER) --db-name=$(DB_NAME)
RUN_FLAGS   ?= --auth-dev-key-dir=.local/auth --encryption-key-file=.local/encryption.key

# Go test flags; `make test TESTFLAGS=-run=TestAPI` narrows the run.
TESTFLAGS   ?=
GOTEST      := go test -race -count=1 -timeout 20m

# Image and deployment.
IMAGE_REGISTRY   ?= quay.io
IMAGE_REPOSITORY ?= fleet-manager/fleet-manager
IMAGE_TAG        ?= $(COMMIT)
NAMESPACE        ?= fleet-manager
# The service template requires the identity provider's settings, e.g.
#   make deploy DEPLOY_PARAMS="-p JWKS_URL=https://sso.example.com/certs -p AUTH_ISSUERS=https://sso.example.com -p AUTH_AUDIENCE=fleet-manager"
DEPLOY_PARAMS    ?=
DEPLOY_PARAMS_DB ?=
# The database template: the development one, or templates/cnpg-template.yml
# (CloudNativePG, three instances with backups) for production.
DB_TEMPLATE      ?= templates/db-template.yml

.PHONY: help
help: ## Show the targets
	@grep -hE '^[a-zA-Z/_-]+:.*## ' $(MAKEFILE_LIST) | awk 'BEGIN {FS = ":.*## "}; {printf "  %-18s %s\n", $$1, $$2}'

# A first build, with an empty Go build cache, compiles every dependency;
# measured on this project's 2-core machines, shared with other builds.
FIRST_BUILD := about 7 minutes on 2 busy cores

.PHONY: build
build: ## Build bin/fleet-manager, bin/fleetshard-sync and bin/fleetctl
	@[ -x $(BINARY) ] || echo "building $(BINARY), bin/fleetshard-sync and bin/fleetctl: a first build (empty Go build cache) takes $(FIRST_BUILD), later ones seconds" >&2
	CGO_ENABLED=0 scripts/with-progress.sh "building $(BINARY)" go build -trimpath -ldflags "$(LDFLAGS)" -o $(BINARY) ./cmd/fleet-manager
	CGO_ENABLED=0 scripts/with-progress.sh "building bin/fleetshard-sync" go build -trimpath -ldflags "$(LDFLAGS)" -o bin/fleetshard-sync ./cmd/fleetshard-sync
	CGO_ENABLED=0 scripts/with-progress.sh "building bin/fleetctl" go build -trimpath -ldflags "$(LDFLAGS)" -o bin/fleetctl ./cmd/fleetctl

.PHONY: run
run: db/setup build ## Run the service against a local PostgreSQL (migrates first)
	@[ -f .local/encryption.key ] || { mkdir -p .local && $(BINARY) generate-key .local/encryption.key; }
	$(BINARY) migrate $(DB_FLAGS)
	$(BINARY) serve $(DB_FLAGS) $(RUN_FLAGS)

.PHONY: run/hydra
run/hydra: db/setup build ## Run the service trusting a local Ory Hydra (state, client ids and secrets in .local/hydra) instead of the development key
	scripts/hydra/build-hydra.sh
	@[ -f .local/encryption.key ] || { mkdir -p .local && $(BINARY) generate-key .local/encryption.key; }
	$(BINARY) migrate $(DB_FLAGS)
	go run ./scripts/hydra/devhydra --state-dir=.local/hydra -- $(BINARY) serve $(DB_FLAGS) --encryption-key-file=.local/encryption.key

.PHONY: test
test: db/setup generate/check test/binaries ## Run every test (starts a local PostgreSQL when none listens)
	$(GOTEST) $(TESTFLAGS) ./...

# The packages whose tests need no server: no PostgreSQL, test hub, Hydra or
# other program `make test/binaries` caches. The script decides from each
# test binary's imports and keeps the list of server harnesses; it runs
# before go test so that its failure stops the target.
.PHONY: test/fast
test/fast: ## Run the tests that need no server (no PostgreSQL, test hub or cached binaries); scripts/fast-packages.sh picks the packages
	pkgs=$$(scripts/fast-packages.sh) && go test -race -count=1 -timeout 5m $(TESTFLAGS) $$pkgs

# How much `make fuzz` fuzzes each target; CI runs it with this default. A
# count of executions, not a duration: Go's fuzz coordinator can report a
# duration's end as a failure, "context deadline exceeded", when a worker is
# slow to stop on a loaded machine (golang/go#75804, not fixed in Go 1.26).
# A duration (FUZZTIME=5m) still works where that race does not matter.
FUZZTIME    ?= 20000x

.PHONY: fuzz
fuzz: db/setup ## Fuzz every API operation through the real router and database for FUZZTIME (no 5xx, no value echoed)
	go test -count=1 -run '^$$' -fuzz FuzzAPIOperation -fuzztime $(FUZZTIME) -parallel 2 ./internal/rest/
	go test -count=1 -run '^$$' -fuzz FuzzBuildSearch -fuzztime $(FUZZTIME) ./internal/postgres/

.PHONY: test/binaries
test/binaries: ## Build or find the test hub (etcd, kube-apiserver), OIDC issuer (Hydra), database tools (pgBackRest, Patroni), Prometheus, a promtool that sends tokens, the OpenShift installer's install-config validation, open-cluster-management's programs, the governance-policy-propagator, and the previous release; cached in ~/.cache/fleet-manager
	scripts/dbops/ensure-tools.sh
	scripts/hub/ensure-hub-binaries.sh >/dev/null
	scripts/hydra/build-hydra.sh
	scripts/prometheus/build-promtool.sh
	scripts/installer/build-validator.sh
	scripts/ocm/build-ocm.sh
	scripts/governance/build-propagator.sh
	scripts/release/build-previous.sh >/dev/null

.PHONY: bench
bench: build ## Benchmark inventory ingest and propagation at the issue's sizes (BENCHFLAGS=--quick to try it)
	go run ./cmd/fleet-bench --fleet-manager=$(BINARY) --db-host=$(DB_HOST) --db-port=$(DB_PORT) --db-user=$(DB_USER) $(BENCHFLAGS)

.PHONY: bench/reads
bench/reads: build ## Benchmark inventory reads (list, search, get, change feed) at 300,000 clusters (BENCHFLAGS=--quick to try it)
	go run ./cmd/fleet-bench --reads --fleet-manager=$(BINARY) --db-host=$(DB_HOST) --db-port=$(DB_PORT) --db-user=$(DB_USER) $(BENCHFLAGS)

.PHONY: bench/registrations
bench/registrations: build ## Benchmark registration creates, bulk onboarding and reads at 300,000 registrations (BENCHFLAGS=--quick to try it)
	go run ./cmd/fleet-bench --registrations --fleet-manager=$(BINARY) --db-host=$(DB_HOST) --db-port=$(DB_PORT) --db-user=$(DB_USER) $(BENCHFLAGS)

.PHONY: bench/pools
bench/pools: build ## Benchmark capacity pools: 200 pools of 10 clusters, bookings per second, threshold to scaled MachinePool (BENCHFLAGS=--quick to try it)
	go run ./cmd/fleet-bench --pools --fleet-manager=$(BINARY) --db-host=$(DB_HOST) --db-port=$(DB_PORT) --db-user=$(DB_USER) $(BENCHFLAGS)

.PHONY: bench/user-metrics
bench/user-metrics: build ## Benchmark user-facing metrics: proxy vs Prometheus directly, text endpoint, 1,000 clusters of 300,000 (BENCHFLAGS=--quick to try it)
	go run ./cmd/fleet-bench --user-metrics --fleet-manager=$(BINARY) --db-host=$(DB_HOST) --db-port=$(DB_PORT) --db-user=$(DB_USER) $(BENCHFLAGS)

.PHONY: bench/dns
bench/dns: db/setup ## Benchmark DNS records through the binary and BIND 9: 1,000 to resolvable, API reads at 300,000 records
	go test -count=1 -timeout 20m -run '^$$' -bench BenchmarkDNSRecordsToResolvable -benchtime 1x $(BENCHFLAGS) ./internal/e2e/

.PHONY: bench/go
bench/go: db/setup ## Run the Go benchmarks (go test -bench), e.g. a page of 100 clusters through the API in process
	go test -run '^$$' -bench . -benchmem $(BENCHFLAGS) ./internal/...

.PHONY: generate
generate: ## Regenerate the Go types and clients from openapi/
	go generate ./pkg/...

.PHONY: generate/check
generate/check: ## Fail when the generated code or a pinned upstream CRD copy is not current
	scripts/check-generated.sh
	scripts/crds.sh check

.PHONY: crds
crds: ## Copy the upstream CRDs the tests install from their pinned Go modules (scripts/crds.sh)
	scripts/crds.sh update

.PHONY: lint
lint: lint/openapi ## gofmt, go vet, staticcheck (the version go.mod pins as a tool), the OpenAPI linters, nothing read from outside the clone
	@outside=$$(git grep -n -e '\.\./shared' -e 'shared/\(hub\|db\)-crds'); \
	if [ -n "$$outside" ]; then echo "these lines point outside the repository; a clone has nothing beside it:"; echo "$$outside"; exit 1; fi
	@unformatted=$$(gofmt -l cmd internal pkg openapi templates); \
	if [ -n "$$unformatted" ]; then echo "gofmt needed:"; echo "$$unformatted"; exit 1; fi
	go vet ./...
	go tool staticcheck ./...

.PHONY: lint/openapi
lint/openapi: ## Spectral (spectral:oas) and Redocly (recommended) on openapi/*.yaml, pinned in tools/openapi-lint; fails on any warning
	tools/openapi-lint/lint.sh

.PHONY: lint/commits
lint/commits: ## Check every commit subject since the check was added is at most 72 characters
	scripts/check-commit-subjects.sh

.PHONY: db/setup
db/setup: ## Make sure PostgreSQL listens on DB_HOST:DB_PORT and DB_NAME exists
	scripts/db.sh setup

.PHONY: db/teardown
db/teardown: ## Stop and delete the project-local PostgreSQL, if db/setup started one
	scripts/db.sh teardown

.PHONY: image
image: ## Build the container image (needs a Docker or Podman engine)
	docker build --build-arg VERSION=$(VERSION) --build-arg COMMIT=$(COMMIT) \
		-t $(IMAGE_REGISTRY)/$(IMAGE_REPOSITORY):$(IMAGE_TAG) .

.PHONY: deploy/render
deploy/render: ## Render the OpenShift templates into .local/deploy (needs oc)
	@command -v oc >/dev/null || { echo "deploy/render needs the oc client"; exit 1; }
	mkdir -p .local/deploy
	oc process --local -f $(DB_TEMPLATE) $(DEPLOY_PARAMS_DB) -o yaml > .local/deploy/db.yaml
	oc process --local -f templates/service-template.yml \
		-p IMAGE_REGISTRY=$(IMAGE_REGISTRY) -p IMAGE_REPOSITORY=$(IMAGE_REPOSITORY) -p IMAGE_TAG=$(IMAGE_TAG) \
		$(DEPLOY_PARAMS) -o yaml > .local/deploy/service.yaml
	@echo "rendered .local/deploy/db.yaml and .local/deploy/service.yaml"

.PHONY: deploy
deploy: deploy/render ## Render the templates and apply them to NAMESPACE
	oc apply -n $(NAMESPACE) -f .local/deploy/db.yaml
	oc apply -n $(NAMESPACE) -f .local/deploy/service.yaml

.PHONY: clean
clean: ## Remove build output
	rm -rf bin .local/deploy
