#!/usr/bin/env bash
# `make demo`: one real tabletop episode with the embedded local model: no network, no API key.
# Prints one line per agent turn while it runs, then what the agent tried, whether the simulator says
# the task is solved, where the trace is and how to run the same episode with a stronger model.
# Knobs (environment): PYRUALEAN_DEMO_MODEL (default qwen2.5-coder-1.5b, see `pyrualean models`),
# PYRUALEAN_DEMO_TASK (put_block_in_bowl), PYRUALEAN_DEMO_SEED (0), PYRUALEAN_DEMO_TURNS (10 python
# calls), PYRUALEAN_DEMO_BUDGET_S (1500 s of policy wall clock), PYRUALEAN_DEMO_THREADS (all cores).
# At the end it prints where the time went: setup (PYRUALEAN_DEMO_SETUP_S, which `make demo` measures),
# the model's assembly, the episode's cold first prompt and its generation, with the speeds llama.cpp
# measured and the CPU they ran on.
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
elapsed() { awk -v a="$1" -v b="$(date +%s.%N)" 'BEGIN{printf "%.1f", b-a}'; }
prep=runs/demo/.prepared-$model  # what `demo.sh prepare` did: seconds of each step, and whether it was while setup ran

# `demo.sh prepare` (make demo runs it in the background while setup installs what only the tests need):
# the model's assembly, then the prompt prefix every task of the demo task's family shares, computed by a
# one-call episode of another task of that family and saved as a slot file (models/slots/) that the demo's
# model server restores. The demo itself then reads only its task card cold.
if [[ ${1:-} == prepare ]]; then
  mkdir -p runs/demo
  t=$(date +%s.%N)
  bin/pyrualean models install "$model" >/dev/null
  m_s=$(elapsed "$t")
  sibling=$(bin/pyrualean tasks --json | "$PY" -c 'import json,sys
ts=json.load(sys.stdin); fam={t["name"]: t["family"] for t in ts}[sys.argv[1]]
print(next(t["name"] for t in ts if t["family"] == fam and t["name"] != sys.argv[1]))' "$task")
  t=$(date +%s.%N)
  rm -rf runs/demo/.prefix
  # One call, one token: the prompt is read (and its prefix saved after the reply), nothing else matters.
  rc=0
  PYRUALEAN_LLM_THREADS=${PYRUALEAN_DEMO_THREADS:-} bin/pyrualean play --runtime local --model "$model" --task "$sibling" --seed 0 \
    --max-turns 1 --openai-max-tokens 1 --images none --out runs/demo/.prefix >/dev/null 2>runs/demo/.prefix.log || rc=$?
  p_s=$(elapsed "$t")
  if [[ ! -s runs/demo/.prefix/turns.jsonl ]]; then
    echo "[demo] the shared prompt prefix was not computed (play exit $rc, runs/demo/.prefix.log); the demo reads it itself"
    exit 1
  fi
  tokens=$("$PY" -c 'import json,sys
for ln in open(sys.argv[1]):
    t = (json.loads(ln).get("timings") or {}); print(t.get("prompt_n", 0), round(t.get("prompt_per_second", 0), 1), t.get("cache_n", 0)); break' runs/demo/.prefix/turns.jsonl 2>/dev/null || echo "0 0 0")
  echo "$m_s $p_s $sibling $tokens" >"$prep"
  echo "[demo] prepared: model assembly ${m_s} s, the shared prompt prefix ${p_s} s (from $sibling; prompt tokens, tokens/s, cached: $tokens)"
  exit 0
fi

t_model=$(date +%s.%N)
bin/pyrualean models install "$model" >/dev/null   # no-op when installed (checksum-verified)
model_s=$(elapsed "$t_model")
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

args=(--robot tabletop --task "$task" --seed "$seed" --max-turns "$turns" --budget-s "$budget" --images none --out "$out")
start=$(date +%s.%N)
set +e
# --runtime local brings its own turn bounds (max tokens, a deadline from the measured speed) and the
# compact prompt profile; it prints a progress line while a slow turn runs.
PYRUALEAN_LLM_THREADS=${PYRUALEAN_DEMO_THREADS:-} bin/pyrualean play --runtime local --model "$model" "${args[@]}" >"$out.line"
rc=$?
set -e
touch "$out.done"
wait $watcher 2>/dev/null || true
rm -f "$out.done"
episode_s=$(awk -v a="$start" -v b="$(date +%s.%N)" 'BEGIN{printf "%.1f", b-a}')
echo "[demo] finished in ${episode_s} s (exit $rc)"
prepared=""  # only what this make demo's setup prepared (PYRUALEAN_DEMO_PREPARED), never a stale file
[[ -n ${PYRUALEAN_DEMO_PREPARED:-} && -f $prep ]] && prepared=$(cat "$prep")
rm -f "$prep"
"$PY" - "$out" "$task" "$seed" "${PYRUALEAN_DEMO_SETUP_S:-}" "$model_s" "$episode_s" "$prepared" <<'PY'
import json, sys, pathlib
out, task, seed = pathlib.Path(sys.argv[1]), sys.argv[2], sys.argv[3]
try:
    r = json.loads((out / "result.json").read_text())
except (OSError, ValueError) as e:
    print(f"[demo] the episode left no result.json ({e}); see the messages above")
    sys.exit(0)
try:
    nb = json.loads((out / "trace.ipynb").read_text())
except (OSError, ValueError):
    nb = {"cells": []}
print(f"[demo] task: {r.get('task_language') or task}")
n = 0
for c in nb.get("cells", []):
    meta = c.get("metadata", {}).get("pyrualean", {})
    if c.get("cell_type") != "code" or meta.get("author") != "agent":
        continue
    n += 1
    src = "".join(c.get("source", "")).strip().splitlines()
    calls = [ln.strip() for ln in src if "robo." in ln] or src[:1]
    errs = [o.get("ename", "") for o in c.get("outputs", []) if o.get("output_type") == "error"]
    outcome = "ran"
    if errs and errs[0] == "EpisodeFinished":
        outcome = "ran until the episode ended"  # the robot refuses motions once the task is done
    elif errs:
        outcome = f"raised {errs[0]}"
    shown = "; ".join(calls[:4]) + (" ..." if len(calls) > 4 else "")
    print(f"[demo] python call {n} {outcome}: {shown[:160]}")
fin = r.get("finish") or {}
if r.get("environment_success"):
    print(f"[demo] SOLVED: the simulator's own check says the task is done, after {r.get('tool_turns')} python "
          f"call(s) and {r.get('policy_wall_s')} s of model and robot time.")
else:
    why = {"call_budget": "it used up its python calls", "timeout": "it ran out of time",
           "planner_error": "the model failed to answer in time", "completed": "the model called finish",
           }.get(r.get("status"), r.get("status"))
    print(f"[demo] NOT SOLVED ({why}); the model's own verdict: {fin.get('status')}: {fin.get('summary', '')[:200]}")
print(f"[demo] every cell, its output and the robot state are in {out}/trace.ipynb")
print(f"[demo]   open it in JupyterLab, or re-run it: bin/pyrualean replay {out}/trace.ipynb")
print(f"[demo] the same episode with a stronger model (any OpenAI-compatible endpoint):")
print(f"[demo]   OPENAI_API_KEY=... bin/pyrualean play --runtime openai --model gpt-4.1 --task {task} --seed {seed}")
print(f"[demo]   bin/pyrualean play --base-url http://HOST:PORT/v1 --model NAME --task {task} --seed {seed}")

# Where the time went: each phase, from turns.jsonl's llama.cpp timings.
setup_s, model_s, episode_s = sys.argv[4], float(sys.argv[5]), float(sys.argv[6])
turns = []
try:
    turns = [json.loads(ln) for ln in (out / "turns.jsonl").read_text().splitlines() if ln.strip()]
except (OSError, ValueError):
    pass
tm = [t.get("timings") or {} for t in turns]
llm_s = sum(t.get("latency_s") or 0 for t in turns)
cpu, cores = "unknown CPU", 0
try:
    for ln in open("/proc/cpuinfo"):
        if ln.startswith("model name"):
            cpu, cores = ln.split(":", 1)[1].strip(), cores + 1
except OSError:
    pass
print(f"[demo] time per phase (CPU: {cpu}, {cores} cores):")
prepared = sys.argv[7].split()
print(f"[demo]   setup           {setup_s + ' s' if setup_s else 'not measured (run as make demo)'}")
if len(prepared) >= 6:
    # make demo: done at the end of setup (within setup's time; beside what only the tests need in a full setup)
    m, p, sib, n, pps, cached = prepared[:6]
    how = (f"{n} tokens of a {sib} prompt read at {pps} tokens/s, saved for the demo" if int(cached) < int(n)
           else f"already saved by an earlier run: {cached} tokens restored, {n} read")
    print(f"[demo]     of which: the model's assembly {m} s and the shared prompt prefix {p} s ({how})")
print(f"[demo]   model assembly  {model_s:.1f} s (install and sha256 check; instant when installed)")
if tm and tm[0].get("prompt_n"):
    t0 = tm[0]
    cached = t0.get("cache_n", 0)
    how = f"{cached} more came from the saved prefix" if cached else "cold: nothing cached"
    print(f"[demo]   first prompt    {t0['prompt_ms'] / 1000:.1f} s: {t0['prompt_n']} tokens read at "
          f"{t0.get('prompt_per_second', 0):.1f} tokens/s ({how})")
gen_n = sum(t.get("predicted_n", 0) for t in tm)
gen_ms = sum(t.get("predicted_ms", 0) for t in tm)
later_n = sum(t.get("prompt_n", 0) for t in tm[1:])
later_ms = sum(t.get("prompt_ms", 0) for t in tm[1:])
if gen_ms:
    print(f"[demo]   generation      {gen_ms / 1000:.1f} s: {gen_n} tokens in {len(tm)} turn(s), {gen_n / gen_ms * 1000:.1f} tokens/s")
if later_ms:
    print(f"[demo]   later prompts   {later_ms / 1000:.1f} s: {later_n} new tokens, {later_n / later_ms * 1000:.1f} tokens/s")
print(f"[demo]   episode         {episode_s:.1f} s in all: {llm_s:.1f} s in model turns, {episode_s - llm_s:.1f} s "
      f"for the rest (kernel and simulator boot, the model server's start and speed check, the robot's motions)")
PY
exit $rc
