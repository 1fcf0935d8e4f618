#!/usr/bin/env bash
# Every test, Go and Python, against the real kernels, simulator and peers installed by setup.sh.
#   --fast  the quick tier (`make test-fast`): `go test -short` and the pytest tests not marked heavy. Tests
#           that need a real kernel, Jupyter, Chromium, Ray, the local model or a simulator episode skip
#           (Go: nbtest.Heavy at the helpers that start them; pytest: the `heavy` marker); no vet, no fuzzing.
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH="$PWD/.venv/bin:$PATH"
# This checkout's kernelspec first (setup.sh), whatever another checkout installed for the user.
export JUPYTER_PATH="$PWD/.venv/share/jupyter${JUPYTER_PATH:+:$JUPYTER_PATH}"
if [[ "${1:-}" == "--fast" ]]; then
  [[ -x .venv/bin/python ]] || { echo "scripts/test.sh --fast: no .venv here: run make setup once" >&2; exit 1; }
  # -p 1 as below: a test that still launches a kernel under -short must not race another package's for a
  # port. Go's test cache stays on: a package whose Go files, and files its tests opened, did not change is
  # not run again. It cannot see what a Python subprocess read, so after a change under robotapi/python run
  # `go clean -testcache` first (or `make test`, which never uses the cache).
  echo "== go test -short"; go test -short -p 1 -timeout 10m ./...
  echo "== pytest -m 'not heavy'"
  .venv/bin/python -m pytest -q -m "not heavy" robotapi/python/tests
  .venv/bin/python -m pytest -q eval/rayservice/ray_driver_test.py eval/rayservice/ray_service_test.py deploy/kuberay_schema_test.py labextension/tests
  exit 0
elif [[ $# -gt 0 ]]; then
  echo "usage: scripts/test.sh [--fast]" >&2
  exit 2
fi
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
  # (a test's own INFO/DEBUG log lines are left out here: they buried the assertion's message before)
  grep -vE '^\s+\S+_test\.go:[0-9]+: time=\S+ level=(INFO|DEBUG) ' "$log" |
    grep -E -A8 '^\s*(--- FAIL|panic: )' | grep -vE '^\s+/|^goroutine |^\S+\(' | head -120
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
echo "== pytest (the Ray driver, deploy/kuberay.yaml against KubeRay's schema)"
.venv/bin/python -m pytest -q eval/rayservice/ray_driver_test.py eval/rayservice/ray_service_test.py deploy/kuberay_schema_test.py
if compgen -G 'labextension/tests/test_*.py' >/dev/null; then
  echo "== pytest (labextension)"; .venv/bin/python -m pytest -q labextension/tests
fi
