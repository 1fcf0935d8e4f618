#!/usr/bin/env bash
# Robot area set-up (idempotent): the Panda meshes come from the robosuite wheel, installed assets-only
# (--no-deps, so mujoco stays at the base.txt pin and numba/opencv are not pulled). setup.sh itself installs
# the editable pyrualean_robot package.
set -euo pipefail
cd "$(dirname "$0")/../.."
want=$(grep -E '^robosuite==' requirements/robot-assets.nodeps | cut -d= -f3)
have=$(.venv/bin/python -c 'import importlib.metadata as m; print(m.version("robosuite"))' 2>/dev/null || true)
if [[ "$have" != "$want" ]]; then
  .venv/bin/pip install -q --disable-pip-version-check --no-deps -r requirements/robot-assets.nodeps
fi
.venv/bin/python -c 'from pyrualean_robot.robots.tabletop_scene import panda_mesh_dirs; panda_mesh_dirs()'
