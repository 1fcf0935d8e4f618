#!/usr/bin/env bash
# Start RoboDojo's eval client for one task against the policy server (needs RoboDojo + Isaac Sim).
set -euo pipefail
TASK=$1 SEED=${2:-0} ACTION_TYPE=${3:-joint} PORT=${4:-19000}
: "${ROBODOJO_ROOT:?set ROBODOJO_ROOT to the RoboDojo checkout}"
exec bash "$ROBODOJO_ROOT/scripts/robodojo.sh" client --task "$TASK" --seed "$SEED" --action-type "$ACTION_TYPE" \
  --policy-url "ws://127.0.0.1:$PORT"
