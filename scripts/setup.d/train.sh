#!/usr/bin/env bash
# The trainers' data libraries (issue #29): .venv-train holds datasets, transformers, TRL and verifiers, whose own
# loaders check what `pyrualean rollouts export` writes (rollouts/ tests). A venv of its own: see
# requirements/train/formats.txt for why they cannot share .venv. Idempotent (a stamp of the requirement files).
set -euo pipefail
cd "$(dirname "$0")/../.."
PY=${PYTHON:-python3}
[[ -x .venv-train/bin/python ]] || { echo "[setup] creating .venv-train"; "$PY" -m venv .venv-train; }
stamp=.venv-train/.pyrualean-reqs
want=$(cat requirements/train/* | sha256sum | cut -d" " -f1)
if [[ ! -f $stamp || $(cat "$stamp") != "$want" ]]; then
  echo "[setup] installing the training data libraries into .venv-train"
  .venv-train/bin/pip install -q --disable-pip-version-check --upgrade pip >/dev/null
  .venv-train/bin/pip install -q --disable-pip-version-check -r requirements/train/formats.txt
  .venv-train/bin/pip install -q --disable-pip-version-check --no-deps -r requirements/train/trl.nodeps
  .venv-train/bin/python -c 'import datasets, transformers, verifiers.v1.utils.trace_store, trl.data_utils' 2>/dev/null
  echo "$want" >"$stamp"
fi
