#!/usr/bin/env bash
# Benchmarks set-up check (issue #7), idempotent. requirements/libero.txt installs LIBERO-PRO (assets bundled,
# no run-time download) and robosuite 1.4.0. Should the venv's robosuite ever differ from 1.4.0 (another area
# pinning a different one), LIBERO gets a private robosuite 1.4.0 under .venv/pyrualean-libero, which
# pyrualean_robot puts first on sys.path only when it boots LIBERO. Then every bundled suite is checked.
set -euo pipefail
cd "$(dirname "$0")/../.."
PY=.venv/bin/python
have=$($PY -c 'import importlib.metadata as m; print(m.version("robosuite"))' 2>/dev/null || true)
PRIV=.venv/pyrualean-libero
if [[ "$have" != "1.4.0" && ! -f $PRIV/robosuite-1.4.0.dist-info/METADATA ]]; then
  echo "[setup] venv has robosuite ${have:-none}; installing robosuite 1.4.0 for LIBERO under $PRIV"
  rm -rf "$PRIV"
  .venv/bin/pip install -q --disable-pip-version-check --no-deps --target "$PRIV" robosuite==1.4.0
fi
MUJOCO_GL=${MUJOCO_GL:-egl} $PY -m pyrualean_robot.robots._libero_sim --check 2>&1 | grep -v "robosuite WARNING"
