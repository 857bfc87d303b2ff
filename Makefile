# Eurekube — build, test and run. `make help` lists the targets.
SHELL := /usr/bin/env bash
.SHELLFLAGS := -euo pipefail -c
.DEFAULT_GOAL := help

# Built tools and binaries live in a cache outside the work tree, versioned,
# so a fresh clone on the same machine reuses them.
CACHE          ?= $(or $(EUREKUBE_CACHE),$(HOME)/.cache/eurekube)
TOOLS          := $(CACHE)/tools
CONTROLLER_GEN_VERSION := v0.22.0
STATICCHECK_VERSION    := v0.8.2
CONTROLLER_GEN := $(TOOLS)/controller-gen-$(CONTROLLER_GEN_VERSION)
STATICCHECK    := $(TOOLS)/staticcheck-$(STATICCHECK_VERSION)
# go-install installs a tool into $(TOOLS), trying three times: a fresh
# machine fetches it from the module proxy, and one failed connection must
# not fail a whole run. (The "no route to host" two cold runs saw was the
# test node routing the registries' address away, fixed in tests/node.)
go-install = for try in 1 2 3; do GOBIN=$(TOOLS) go install $(1) && break; [ $$try -lt 3 ] || exit 1; echo "go install $(1) failed; trying again in 10 s" >&2; sleep 10; done
IMAGE_TAG      ?= dev
GO_TEST_FLAGS  ?= -count=1 -timeout 40m
FUZZTIME       ?= 10s
# The cpu shares (cgroup v1; v2: cpu.weight in proportion) of the one group
# make test runs every command in but the real node's two suites and the
# fuzz targets. Outside it, those suites' host processes no longer share
# one autogroup's 1,024 with every other lane's threads: the node path (the
# run's length) has the cores when it wants them. 1,024, not fewer: at 256,
# beside a CPU-bound job, a -race test in the group starved past its
# client's timeout (docs/testing.md). 0: no group.
REST_SHARES    ?= 1024
export EUREKUBE_CACHE := $(CACHE)
# Every Go build and test that make runs is static and -trimpath, as the
# images and the built tools are, so that each dependency is compiled once
# for all of them: the images, the node's suites, make unit and lint share
# one build cache entry per package. The race detector's builds (cgo,
# CGO_ENABLED=1 where they run) and fuzzing's (instrumented) stay apart.
# The test binaries link without a symbol table or DWARF (-ldflags=-s,
# which implies -w): a panic's and the race detector's stacks keep their
# files and lines (they come from the runtime's own tables), and linking,
# 146 of a warm make test's 1,943 CPU-s at 2a64bae, costs a fifth less (the
# controller's race test binary: 10.3 -> 8.1 CPU-s, 103 -> 78 MB). Builds
# that set -ldflags themselves (the images, the tools) keep theirs.
# GOFLAGS keeps what go env says (go env -w included; an -ldflags there
# wins).
export CGO_ENABLED ?= 0
GOENV_FLAGS := $(shell go env GOFLAGS 2>/dev/null)
export GOFLAGS := $(strip $(filter-out -trimpath,$(GOENV_FLAGS)) -trimpath $(if $(filter -ldflags=%,$(GOENV_FLAGS)),,-ldflags=-s))
# Builds (or finds cached) what the sandbox and the bench run, two builds at
# a time (tests/tools/artifacts.sh), and exports their paths. Assigned
# before eval, so a failed build stops the recipe.
ARTIFACTS := artifacts=$$(tests/tools/artifacts.sh); eval "$$artifacts"
# The same, and what only the tests use: Helm (the chart's tests) and
# promtool (the alerts' tests).
TEST_ARTIFACTS := artifacts=$$(tests/tools/artifacts.sh --test-tools); eval "$$artifacts"

.PHONY: help
help: ## List the targets.
	@awk 'BEGIN{FS=":.*## "} /^[a-z-]+:.*## /{printf "  %-14s %s\n", $$1, $$2}' $(MAKEFILE_LIST)

.PHONY: deps
deps: ## Install what the build needs that a machine may lack (apt, idempotent).
	tests/tools/deps.sh

.PHONY: build
build: ## Build bin/manager, bin/registrar and bin/eurekube (static; also bin/kubectl-eurekube, the kubectl plugin).
	mkdir -p bin
	CGO_ENABLED=0 go build -trimpath -ldflags='-s -w' -o bin/ ./cmd/...
	cp bin/eurekube bin/kubectl-eurekube

$(CONTROLLER_GEN):
	mkdir -p $(TOOLS)
	$(call go-install,sigs.k8s.io/controller-tools/cmd/controller-gen@$(CONTROLLER_GEN_VERSION))
	mv $(TOOLS)/controller-gen $@

$(STATICCHECK):
	mkdir -p $(TOOLS)
	$(call go-install,honnef.co/go/tools/cmd/staticcheck@$(STATICCHECK_VERSION))
	mv $(TOOLS)/staticcheck $@

.PHONY: generate
generate: $(CONTROLLER_GEN) ## Generate deepcopy code and the CRD from api/.
	$(CONTROLLER_GEN) object paths=./api/...
	$(CONTROLLER_GEN) crd paths=./api/... output:crd:artifacts:config=manifests/crd/bases
	@# The chart cannot read outside its directory: it carries copies, which
	@# tests/helmchart compares byte for byte.
	cp manifests/crd/bases/eurekube.io_*.yaml manifests/monitoring/prometheus-rules.yaml charts/eurekube/files/

.PHONY: manifests
manifests: generate ## Same as generate (kubebuilder's name for the CRD step).

.PHONY: lint
lint: $(STATICCHECK) ## gofmt, go vet and staticcheck.
	@out=$$(gofmt -l $$(git ls-files '*.go')); if [ -n "$$out" ]; then echo "gofmt: $$out"; exit 1; fi
	go vet ./...
	$(STATICCHECK) ./...

.PHONY: envtest
envtest: ## Build kube-apiserver, etcd, kube-controller-manager and kubectl from Go modules (cached).
	tests/tools/envtest/build.sh

.PHONY: eureka-server
eureka-server: ## Build the Spring Cloud Eureka server used by the tests (Maven, cached).
	tests/eureka-server/build.sh

.PHONY: spring-boot-admin
spring-boot-admin: ## Build the Spring Boot Admin server used by the tests (Maven, cached).
	tests/spring-boot-admin/build.sh

.PHONY: unit
unit: ## The tests that need nothing but Go (go test -short): seconds, no JVM, no API server, no root.
	go test -short -count=1 ./...

.PHONY: unit-race
unit-race: ## make unit with the race detector (needs gcc; make test runs every package's tests with it).
	CGO_ENABLED=1 go test -short -race -count=1 ./...

.PHONY: test
# tests/tools/testrun runs the end-to-end suite on the real node, the
# registrar suite (both mostly waiting), the controller suite and the
# eureka package (its ten-minute replay of a real server's timings) with
# the race detector, and lint, from the start; beside them every other package's
# tests with the race detector (their -short tests, the unit tier, run
# there once) and then the fuzz targets (one worker each: the end-to-end
# stories still run beside them; make fuzz uses every core); and leaves no
# process behind however the run ends. All but the node's suites and the
# fuzz targets run in one cpu cgroup with REST_SHARES.
test: deps ## Install and build everything needed, then run every test.
	@start=$$(date +%s); \
	$(TEST_ARTIFACTS); \
	go build -o bin/testrun ./tests/tools/testrun; \
	exec bin/testrun -since $$start -background ./tests/cluster,./tests/lifecycle,./tests/registrar \
	  -first ./tests/cluster,./tests/lifecycle -rest-shares $(REST_SHARES) \
	  -race ./controller,./eureka -race-rest \
	  -beside '$(MAKE) --no-print-directory generate-check lint' -fuzztime $(FUZZTIME) -fuzzworkers 1 -- $(GO_TEST_FLAGS)

.PHONY: generate-check
generate-check: generate ## Fail when generated files are out of date.
	@git diff --exit-code -- api manifests/crd charts/eurekube/files || { echo "generated files are stale: run make generate and commit"; exit 1; }

.PHONY: fuzz
fuzz: ## Run every fuzz target for FUZZTIME each.
	go run ./tests/tools/testrun -fuzz-only -fuzztime $(FUZZTIME)

# The commit whose manager the reconciler's scenarios, and whose webhook
# handler the handler benchmark, measure beside this tree's (issue 30
# measured the regression there); BENCH_BEFORE= skips it.
BENCH_BEFORE ?= efc310a

.PHONY: bench
bench: deps ## Measure Eurekube beside what it is compared with: bench/results.json and bench/REPORT.md, of a clean tree (BENCH_QUICK=1: minutes, for development; BENCH_BEFORE=REV).
	@start=$$SECONDS; \
	$(ARTIFACTS); \
	go build -o bin/benchrun ./tests/bench/cmd/benchrun; \
	BENCH_BEFORE=$(BENCH_BEFORE) bin/benchrun -out bench; \
	echo "make bench: $$((SECONDS - start))s"

.PHONY: run
run: ## The local sandbox (root): a real node on this machine with Eurekube installed from manifests/default, Eureka and a sample service (Ctrl-C stops it).
	@# Before any build: on a fresh clone the builds take minutes.
	@[ "$$(id -u)" -eq 0 ] || { echo "make run: not root: it runs a real Kubernetes node on this machine, so it needs root (it mounts, creates network interfaces and iptables rules, and runs containerd); run make run as root" >&2; exit 1; }
	@tests/tools/deps.sh
	@$(ARTIFACTS); \
	go build -o bin/eurekube-sandbox ./tests/sandbox/cmd/eurekube-sandbox; \
	exec bin/eurekube-sandbox $(RUN_ARGS)

.PHONY: images
images: build ## Write image archives (bin/images/<name>.tar, eurekube/<name>:$(IMAGE_TAG)) without a daemon, from the static binaries of make build.
	CGO_ENABLED=0 go build -trimpath -ldflags='-s -w' -o bin/ ./tests/testapp ./tests/images/pause
	go run ./tests/images/cmd/imagebuild -bin bin -out bin/images -tag $(IMAGE_TAG) -revision "$$(git rev-parse HEAD 2>/dev/null || echo unknown)"

.PHONY: node-clean
node-clean: ## Restore the host after a test node killed before its teardown (root): containers, mounts, cni0, rules, sysctls.
	go run ./tests/node/cmd/nodeclean

.PHONY: docker-build
docker-build: ## Build the manager and registrar images where a Docker engine runs.
	docker build --target manager -t eurekube/manager:$(IMAGE_TAG) .
	docker build --target registrar -t eurekube/registrar:$(IMAGE_TAG) .

.PHONY: deploy
deploy: ## Apply manifests/default to the current kubectl context (needs cert-manager).
	kubectl apply -k manifests/default
