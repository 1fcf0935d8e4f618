#!/usr/bin/env bash
# One idempotent set-up for developers, CI and the Docker image: Debian packages, the Python venv
# (.venv), the robot package, the `pyrualean` kernelspec and bin/pyrualean. Safe to re-run.
# `setup.sh demo` (make demo) installs only what an episode with the embedded model needs: on a slow
# 2-core machine the test-only part (Chromium, Ray, JupyterLab, LIBERO, npm, the training venv) took
# minutes and slowed the demo's prompt prefix computed beside it; `make test` installs the rest later.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$(pwd)
mode=${1:-all}
case $mode in
  all | demo) ;;
  *) echo "usage: scripts/setup.sh [all|demo]" >&2; exit 64 ;;
esac

log() { printf '[setup] %s\n' "$*"; }

# bin/pyrualean builds beside the Debian and Python installs (it needs neither); waited for below.
log "building bin/pyrualean (in the background)"
go build -o bin/pyrualean ./cmd/pyrualean &
build_pid=$!

# Debian packages: offscreen GL for MuJoCo (EGL and OSMesa), ZeroMQ-free (Go speaks ZMTP itself).
# chromium: JupyterLab browser tests (driven by playwright-core, never a downloaded browser).
# iproute2: the Ray test cluster's private network namespace (loopback up).
deb_pkgs=(libosmesa6 libegl1 libegl-mesa0 libgl1-mesa-dri bubblewrap)
[[ $mode == all ]] && deb_pkgs+=(chromium iproute2)
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
# The demo's episode needs the kernel and notebook packages (base.txt) and llama.cpp (llm.txt) only;
# a full install (its stamp current) covers it.
reqs_hash() { cat "$@" $(ls robotapi/python/pyproject.toml 2>/dev/null) | sha256sum | cut -d" " -f1; }
reqs=(requirements/*.txt)
stamp=.venv/.pyrualean-reqs
want=$(reqs_hash "${reqs[@]}")
if [[ $mode == demo && ! ( -f $stamp && $(cat "$stamp") == "$want" ) ]]; then
  reqs=(requirements/base.txt requirements/llm.txt)
  stamp=.venv/.pyrualean-reqs-demo
  want=$(reqs_hash "${reqs[@]}")
fi
if [[ ! -f $stamp || $(cat "$stamp") != "$want" ]]; then
  log "installing Python packages: ${reqs[*]}"
  .venv/bin/pip install -q --disable-pip-version-check --upgrade pip >/dev/null
  for f in "${reqs[@]}"; do .venv/bin/pip install -q --disable-pip-version-check -r "$f"; done
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

# What an episode needs first (the robot's assets, bin/pyrualean), then the demo's model and prompt
# prefix (PYRUALEAN_DEMO_PREPARE=LOGFILE: scripts/demo.sh prepare) in the background, beside what only
# the tests need (none of it in demo mode).
bash scripts/setup.d/robot.sh
wait "$build_pid" || { log "building bin/pyrualean failed"; exit 1; }
log "built bin/pyrualean"
if [[ -n ${PYRUALEAN_DEMO_PREPARE:-} ]]; then
  log "preparing the demo in the background (its model, the shared prompt prefix): $PYRUALEAN_DEMO_PREPARE"
  mkdir -p "$(dirname "$PYRUALEAN_DEMO_PREPARE")"
  # A process group of its own (setsid), stopped with setup if setup fails or is interrupted.
  setsid bash scripts/demo.sh prepare >"$PYRUALEAN_DEMO_PREPARE" 2>&1 &
  prep_pid=$!
  trap 'kill -- -"$prep_pid" 2>/dev/null || true' EXIT
  trap 'exit 130' INT TERM
fi
wait_prepared() {
  [[ -z ${prep_pid:-} ]] && return 0
  if wait "$prep_pid"; then tail -n 1 "$PYRUALEAN_DEMO_PREPARE"; else log "the demo's preparation failed (the demo does it itself): $PYRUALEAN_DEMO_PREPARE"; fi
  trap - EXIT INT TERM
}
if [[ $mode == demo ]]; then
  wait_prepared
  log "done: what the demo needs (make setup or make test installs the rest)"
  exit 0
fi

# Node packages for browser tests and agent CLIs: one locked package.json per folder.
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

wait_prepared
log "done"
