#!/usr/bin/env bash
# Install what the policy server needs into the current (policy) environment: the pyrualean robot package
# and the WebSocket protocol deps. PYRUALEAN_ROOT is the pyrualean checkout (default: two levels up).
set -euo pipefail
HERE=$(cd "$(dirname "$(readlink -f "$0")")" && pwd)
ROOT=${PYRUALEAN_ROOT:-$(cd "$HERE/../.." && pwd)}
python -m pip install -e "$ROOT/robotapi/python" "websockets==17.4" "msgpack==1.2.4" "msgpack-numpy==0.4.8" "PyYAML>=6"
