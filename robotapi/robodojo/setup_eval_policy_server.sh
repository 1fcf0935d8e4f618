#!/usr/bin/env bash
# Start the policy server: XPolicyLab's own when it is importable, else this dir's serve.py (same protocol).
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
TASK=$1 SEED=${2:-0} ACTION_TYPE=${3:-joint} PORT=${4:-19000}
OVR=(task_name="$TASK" seed="$SEED" action_type="$ACTION_TYPE" policy_server_port="$PORT")
if python -c "import XPolicyLab" 2>/dev/null; then
  exec python -m XPolicyLab.setup_policy_server --config_path "$HERE/deploy.yml" --overrides "${OVR[@]}"
fi
exec python "$HERE/serve.py" --config_path "$HERE/deploy.yml" --port "$PORT" --overrides "${OVR[@]}"
