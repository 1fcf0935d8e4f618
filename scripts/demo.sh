#!/usr/bin/env bash
# `make demo`: one real tabletop episode with the embedded local model: no network, no API key.
# Prints one line per agent turn while it runs, then the result and where the trace is.
# Knobs (environment): PYRUALEAN_DEMO_MODEL (default qwen2.5-coder-1.5b, see `pyrualean models`),
# PYRUALEAN_DEMO_TASK (put_block_in_bowl), PYRUALEAN_DEMO_SEED (0), PYRUALEAN_DEMO_TURNS (10 python
# calls), PYRUALEAN_DEMO_BUDGET_S (1500 s of policy wall clock), PYRUALEAN_DEMO_THREADS (all cores).
set -euo pipefail
cd "$(dirname "$0")/.."
model=${PYRUALEAN_DEMO_MODEL:-qwen2.5-coder-1.5b}
task=${PYRUALEAN_DEMO_TASK:-put_block_in_bowl}
seed=${PYRUALEAN_DEMO_SEED:-0}
turns=${PYRUALEAN_DEMO_TURNS:-10}
budget=${PYRUALEAN_DEMO_BUDGET_S:-1500}
out=runs/demo/$(date -u +%Y%m%dT%H%M%S)-$task-seed$seed
PY=.venv/bin/python

[[ -x bin/pyrualean ]] || go build -o bin/pyrualean ./cmd/pyrualean
bin/pyrualean models install "$model" >/dev/null   # no-op when installed (checksum-verified)
echo "[demo] model $model, task $task, seed $seed, at most $turns python calls, ${budget}s budget"
echo "[demo] run folder $out (trace.ipynb, turns.jsonl, result.json)"
mkdir -p "$out"

# Per-turn progress: follow turns.jsonl as the agent appends to it.
progress_py=$(cat <<'PY'
import json, os, sys, time
path, stop = sys.argv[1], sys.argv[2]
pos = 0
while True:
    finished = os.path.exists(stop)  # checked before the last read, so no line is missed
    try:
        with open(path) as f:
            f.seek(pos)
            chunk = f.read()
    except OSError:
        chunk = ""
    done = chunk.rfind("\n") + 1
    pos += len(chunk[:done].encode())
    for line in chunk[:done].splitlines():
        try:
            t = json.loads(line)
        except ValueError:
            continue
        u = t.get("usage") or {}
        what = ", ".join(t.get("tool_calls") or []) or ("error: " + t["error"] if t.get("error") else "no tool call")
        print(f"[demo] turn {t.get('turn')}: {what}  ({t.get('latency_s', 0):.0f} s, "
              f"{u.get('input_tokens', 0)} prompt + {u.get('output_tokens', 0)} generated tokens)", flush=True)
    if finished:
        break
    time.sleep(0.5)
PY
)
"$PY" -u -c "$progress_py" "$out/turns.jsonl" "$out.done" &
watcher=$!
trap 'kill $watcher 2>/dev/null || true' EXIT

args=(--robot tabletop --task "$task" --seed "$seed" --max-turns "$turns" --budget-s "$budget"
      --images none --openai-tool-choice required --openai-temperature 0.2 --openai-max-tokens 768
      --out "$out")
start=$(date +%s)
set +e
if bin/pyrualean play -h 2>&1 | grep 'local (embedded' >/dev/null; then
  PYRUALEAN_LLM_THREADS=${PYRUALEAN_DEMO_THREADS:-} bin/pyrualean play --runtime local --model "$model" "${args[@]}" >"$out.line"
  rc=$?
else
  # Fallback while play has no --runtime local: serve the model ourselves and point play at it.
  PYRUALEAN_LLM_THREADS=${PYRUALEAN_DEMO_THREADS:-} bin/pyrualean models serve "$model" --port 0 >"$out.serve" &
  server=$!
  trap 'kill $watcher $server 2>/dev/null || true' EXIT
  for _ in $(seq 600); do [[ -s $out.serve ]] && break; sleep 1; done
  base=$("$PY" -c 'import json,sys; print(json.load(open(sys.argv[1]))["base_url"])' "$out.serve")
  bin/pyrualean play --base-url "$base" --model "$model" "${args[@]}" >"$out.line"
  rc=$?
  kill "$server" 2>/dev/null || true
fi
set -e
touch "$out.done"
wait $watcher 2>/dev/null || true
rm -f "$out.done"
echo "[demo] finished in $(( $(date +%s) - start )) s (exit $rc)"
cat "$out.line"
"$PY" - "$out" <<'PY'
import json, sys, pathlib
out = pathlib.Path(sys.argv[1])
try:
    r = json.loads((out / "result.json").read_text())
except (OSError, ValueError) as e:
    print(f"[demo] no result.json: {e}")
    sys.exit(0)
print(f"[demo] status {r.get('status')}, environment success {r.get('environment_success')}, "
      f"{r.get('tool_turns')} tool turns, policy wall {r.get('policy_wall_s')} s")
PY
echo "[demo] trace: $out/trace.ipynb   (open it in JupyterLab, or: bin/pyrualean replay $out/trace.ipynb)"
exit $rc
