# pyrualean: the two commands a newcomer needs are `make demo` and `make test`.
SHELL := /bin/bash
GO ?= go
export PATH := $(CURDIR)/.venv/bin:$(PATH)

.PHONY: setup build demo test test-go test-py bench fmt vet clean

setup:
	bash scripts/setup.sh

build:
	$(GO) build -o bin/pyrualean ./cmd/pyrualean

# The main job: one real tabletop episode with no network and no API key.
demo: setup
	bash scripts/demo.sh

test: setup
	bash scripts/test.sh

test-go:
	$(GO) test ./...

test-py:
	.venv/bin/python -m pytest -q robotapi/python/tests

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
