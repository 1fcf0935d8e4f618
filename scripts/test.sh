#!/usr/bin/env bash
# Every test, Go and Python, against the real kernels, simulator and peers installed by setup.sh.
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH="$PWD/.venv/bin:$PATH"
# This checkout's kernelspec first (setup.sh), whatever another checkout installed for the user.
export JUPYTER_PATH="$PWD/.venv/share/jupyter${JUPYTER_PATH:+:$JUPYTER_PATH}"
echo "== go vet"; go vet ./...
# -p 1: packages one at a time, so kernels launched by different test binaries never race for the same
# free port (two launches can be handed the same port before either kernel binds it).
# The whole log is kept; on a failure its key lines are printed again at the end, because a CI page may
# show only the tail (a timeout's goroutine dump otherwise buries the name of the test that hung).
log=$(mktemp "${TMPDIR:-/tmp}/pyrualean-go-test.XXXXXX")
echo "== go test (full log: $log)"
if ! go test -p 1 -count=1 -timeout 25m ./... 2>&1 | tee "$log"; then
  echo "== go test failed; the failing and still-running tests, from $log:"
  # a failure with its first lines, a timeout with "running tests:", then the failed packages
  grep -E -A6 '^(--- FAIL|panic: )' "$log" | grep -vE '^\s+/|^goroutine |^\S+\(' | head -80
  grep -E '^FAIL\s' "$log"
  exit 1
fi
echo "== go fuzz (brief)"
for pkg in $(grep -rlE '^func Fuzz' --include='*_test.go' . | xargs -n1 dirname | sort -u); do
  for t in $(grep -hoE '^func (Fuzz[A-Za-z0-9_]+)' "$pkg"/*_test.go | sed 's/func //'); do
    # a count, not a duration: Go 1.26's coordinator can fail a target with "context deadline exceeded"
    # when a duration ends while a starved worker is mid-input (golang/go#75804, fixed in Go 1.27)
    go test -run '^$' -fuzz "^${t}\$" -fuzztime 60000x "$pkg/"
  done
done
if compgen -G 'robotapi/python/tests/test_*.py' >/dev/null; then
  echo "== pytest"; .venv/bin/python -m pytest -q robotapi/python/tests
fi
echo "== pytest (the Ray driver)"; .venv/bin/python -m pytest -q eval/ray_driver_test.py
if compgen -G 'labextension/tests/test_*.py' >/dev/null; then
  echo "== pytest (labextension)"; .venv/bin/python -m pytest -q labextension/tests
fi
