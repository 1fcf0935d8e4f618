#!/usr/bin/env bash
# Robot area set-up (idempotent): Panda meshes from the robosuite wheel (assets only, --no-deps so mujoco stays at
# the base.txt pin) and the editable pyrualean_robot package.
set -euo pipefail
cd "$(dirname "$0")/../.."
if ! .venv/bin/python -c 'import importlib.metadata as m, sys; sys.exit(m.version("robosuite") != "1.5.2")' 2>/dev/null; then
  .venv/bin/pip install -q --disable-pip-version-check --no-deps -r requirements/robot-assets.nodeps
fi
.venv/bin/pip install -q --disable-pip-version-check --no-deps -e robotapi/python
