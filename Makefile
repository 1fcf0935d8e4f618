# pyrualean: the two commands a newcomer needs are `make demo` and `make test`.
SHELL := /bin/bash
GO ?= go
export PATH := $(CURDIR)/.venv/bin:$(PATH)

.PHONY: setup build demo test test-fast bench fmt vet clean

setup:
	bash scripts/setup.sh

build:
	$(GO) build -o bin/pyrualean ./cmd/pyrualean

# The main job: one real tabletop episode with no network and no API key. Its setup installs only what
# the episode needs (scripts/setup.sh demo; `make test` installs the rest) and is timed for the demo's
# time-per-phase summary; then the demo's model is assembled and its shared prompt prefix computed
# (scripts/demo.sh prepare), with the machine to themselves.
demo:
	@t0=$$(date +%s); PYRUALEAN_DEMO_PREPARE=runs/demo/prepare.log bash scripts/setup.sh demo && \
		PYRUALEAN_DEMO_SETUP_S=$$(( $$(date +%s) - t0 )) PYRUALEAN_DEMO_PREPARED=1 bash scripts/demo.sh

# Everything: go vet, every Go test (-p 1: kernels launched by different test binaries must not race for a
# free port), brief fuzzing, every pytest test (scripts/test.sh).
test: setup
	bash scripts/test.sh

# The quick check (a few minutes on 2 cores, after `make setup` once): `go test -short` and the pytest tests
# not marked heavy. What needs a real kernel, Jupyter, Chromium, Ray, the local model or a simulator
# episode is skipped, with the reason; `make test` runs it.
test-fast:
	bash scripts/test.sh --fast

bench: setup
	./bin/pyrualean bench kernel
	./bin/pyrualean bench robot
	./bin/pyrualean bench tokens
	./bin/pyrualean bench gateway

fmt:
	gofmt -w $$(git ls-files '*.go')

vet:
	$(GO) vet ./...

clean:
	rm -rf bin runs/demo
