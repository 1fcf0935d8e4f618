#!/usr/bin/env bash
# One idempotent set-up for developers, CI and the Docker image: Debian packages, the Python venv
# (.venv), the robot package, the `pyrualean` kernelspec and bin/pyrualean. Safe to re-run.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$(pwd)

log() { printf '[setup] %s\n' "$*"; }

# Debian packages: offscreen GL for MuJoCo (EGL and OSMesa), ZeroMQ-free (Go speaks ZMTP itself).
# chromium: JupyterLab browser tests (driven by playwright-core, never a downloaded browser).
# iproute2: the Ray test cluster's private network namespace (loopback up).
deb_pkgs=(libosmesa6 libegl1 libegl-mesa0 libgl1-mesa-dri chromium bubblewrap iproute2)
[[ -n ${PYRUALEAN_EXTRA_DEB:-} ]] && read -r -a extra <<<"$PYRUALEAN_EXTRA_DEB" && deb_pkgs+=("${extra[@]}")
missing=()
for p in "${deb_pkgs[@]}"; do dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p"); done
if ((${#missing[@]})); then
  log "installing Debian packages: ${missing[*]}"
  SUDO=""; [[ $(id -u) -ne 0 ]] && SUDO="sudo"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

# Python venv with pinned packages; each requirements/*.txt belongs to one area of the project.
PY=${PYTHON:-python3}
if [[ ! -x .venv/bin/python ]]; then
  log "creating .venv"
  "$PY" -m venv .venv
fi
stamp=.venv/.pyrualean-reqs
want=$(cat requirements/*.txt $(ls robotapi/python/pyproject.toml 2>/dev/null) | sha256sum | cut -d" " -f1)
if [[ ! -f $stamp || $(cat "$stamp") != "$want" ]]; then
  log "installing Python packages"
  .venv/bin/pip install -q --disable-pip-version-check --upgrade pip >/dev/null
  for f in requirements/*.txt; do .venv/bin/pip install -q --disable-pip-version-check -r "$f"; done
  if [[ -f robotapi/python/pyproject.toml ]]; then
    .venv/bin/pip install -q --disable-pip-version-check --no-deps -e robotapi/python
  fi
  echo "$want" >"$stamp"
fi
# Bytecode for the robot package (an editable install, so pip compiled none): robot servers and sealed
# kernels import it read-only, and PYTHONDONTWRITEBYTECODE is common, so without this every episode's
# processes compile it from source (~50 ms of a sealed episode's robot-ready time, measured by bench robot).
if [[ -d robotapi/python/pyrualean_robot ]]; then
  .venv/bin/python -m compileall -q robotapi/python/pyrualean_robot >/dev/null
fi

# The `pyrualean` kernelspec: this venv's ipykernel, offscreen rendering on CPU. Its home is the venv
# (bin/pyrualean and scripts/test.sh put .venv/share/jupyter first on JUPYTER_PATH, so each checkout
# runs its own); the user-level copy, for a Jupyter started elsewhere, is written only where none is
# or where the one there points at a python that is gone, so a second checkout never takes over a
# live one's kernel.
.venv/bin/python - "$ROOT" <<'PY'
import json, os, sys, pathlib
root = sys.argv[1]
from jupyter_core.paths import jupyter_data_dir
spec = {
    "argv": [f"{root}/.venv/bin/python", "-Xfrozen_modules=off", "-m", "ipykernel_launcher", "-f", "{connection_file}"],
    "display_name": "Python (pyrualean robot)",
    "language": "python",
    "interrupt_mode": "signal",
    "env": {"MUJOCO_GL": "egl", "PYOPENGL_PLATFORM": "egl", "PYDEVD_DISABLE_FILE_VALIDATION": "1",
            "PYRUALEAN_ROOT": root},
    "metadata": {"debugger": False},
}
logo = pathlib.Path(sys.prefix) / "share/jupyter/kernels/python3"

def install(d: pathlib.Path) -> None:
    d.mkdir(parents=True, exist_ok=True)
    (d / "kernel.json").write_text(json.dumps(spec, indent=1) + "\n")
    for name in ("logo-32x32.png", "logo-64x64.png", "logo-svg.svg"):
        src = logo / name
        if src.exists():
            (d / name).write_bytes(src.read_bytes())
    print(f"[setup] kernelspec pyrualean -> {d}")

install(pathlib.Path(root) / ".venv/share/jupyter/kernels/pyrualean")
user = pathlib.Path(jupyter_data_dir()) / "kernels" / "pyrualean"
try:
    live = os.path.exists(json.loads((user / "kernel.json").read_text())["argv"][0])
except (OSError, ValueError, KeyError, IndexError):
    live = False
if not live:
    install(user)
PY

# Node packages for browser tests and agent CLIs: one locked package.json per folder.
# What an episode needs first (the robot's assets, bin/pyrualean): built before what only the tests need,
# so that `make demo` (PYRUALEAN_DEMO_PREPARE=LOGFILE) prepares its model and prompt prefix in the
# background meanwhile (scripts/demo.sh prepare).
bash scripts/setup.d/robot.sh
log "building bin/pyrualean"
go build -o bin/pyrualean ./cmd/pyrualean
if [[ -n ${PYRUALEAN_DEMO_PREPARE:-} ]]; then
  log "preparing the demo in the background (its model, the shared prompt prefix): $PYRUALEAN_DEMO_PREPARE"
  mkdir -p "$(dirname "$PYRUALEAN_DEMO_PREPARE")"
  # A process group of its own (setsid), stopped with setup if setup fails or is interrupted.
  setsid bash scripts/demo.sh prepare >"$PYRUALEAN_DEMO_PREPARE" 2>&1 &
  prep_pid=$!
  trap 'kill -- -"$prep_pid" 2>/dev/null || true' EXIT
  trap 'exit 130' INT TERM
fi

for d in e2e agent/agentcli/node; do
  if [[ -f $d/package-lock.json ]]; then
    lock=$(sha256sum "$d/package-lock.json" | cut -d' ' -f1)
    if [[ ! -f $d/node_modules/.pyrualean-lock || $(cat "$d/node_modules/.pyrualean-lock") != "$lock" ]]; then
      log "npm ci in $d"
      (cd "$d" && npm ci --no-audit --no-fund --loglevel=error)
      echo "$lock" >"$d/node_modules/.pyrualean-lock"
    fi
  fi
done

# Optional extra set-up steps owned by one area each (models, benchmarks): scripts/setup.d/*.sh
for f in scripts/setup.d/*.sh; do [[ -f $f && $f != scripts/setup.d/robot.sh ]] && bash "$f"; done

if [[ -n ${prep_pid:-} ]]; then
  if wait "$prep_pid"; then tail -n 1 "$PYRUALEAN_DEMO_PREPARE"; else log "the demo's preparation failed (the demo does it itself): $PYRUALEAN_DEMO_PREPARE"; fi
  trap - EXIT INT TERM
fi
log "done"
