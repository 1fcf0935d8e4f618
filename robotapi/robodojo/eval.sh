#!/usr/bin/env bash
# Evaluate PyRUA_Lean on RoboDojo tasks. Called by RoboDojo's scripts/robodojo.sh eval --policy-dir ..., or
# by hand from the XPolicyLab root:  bash policy/PyRUA_Lean/eval.sh <task> [seed] [action_type]
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
TASK=${1:?usage: eval.sh <task> [seed] [action_type]}
SEED=${2:-0}
ACTION_TYPE=${3:-joint}
PORT=${PYRUALEAN_POLICY_PORT:-19000}
command -v pyrualean >/dev/null || { echo "eval.sh: pyrualean is not on PATH (run install.sh)" >&2; exit 2; }
bash "$HERE/setup_eval_policy_server.sh" "$TASK" "$SEED" "$ACTION_TYPE" "$PORT" &
SERVER=$!
trap 'kill $SERVER 2>/dev/null || true' EXIT
bash "$HERE/setup_eval_env_client.sh" "$TASK" "$SEED" "$ACTION_TYPE" "$PORT"
