#!/usr/bin/env bash
# JupyterLab as a live collaborator (issue #18), idempotent: the pyrualean JupyterLab extension in
# labextension/ (TypeScript) is built with JupyterLab's own builder from npm (@jupyterlab/builder,
# pinned in labextension/package-lock.json) through `jupyter labextension build`, against the venv's
# JupyterLab, and installed into the venv with its server extension (pyrualean_lab): the labextension
# as .venv/share/jupyter/labextensions/pyrualean-lab, the server extension enabled in
# .venv/etc/jupyter. requirements/lab.txt (installed by setup.sh) brings jupyter-collaboration.
set -euo pipefail
cd "$(dirname "$0")/../.."
ROOT=$(pwd)
LAB=labextension
VENV=$ROOT/.venv
log() { printf '[setup] %s\n' "$*"; }

lock=$(sha256sum "$LAB/package-lock.json" | cut -d' ' -f1)
if [[ ! -f $LAB/node_modules/.pyrualean-lock || $(cat "$LAB/node_modules/.pyrualean-lock") != "$lock" ]]; then
  log "npm ci in $LAB"
  (cd "$LAB" && npm ci --no-audit --no-fund --loglevel=error)
  echo "$lock" >"$LAB/node_modules/.pyrualean-lock"
fi

staging=$("$VENV/bin/python" -c 'import jupyterlab, os; print(os.path.join(os.path.dirname(jupyterlab.__file__), "staging"))')
want=$(cat "$LAB/package-lock.json" "$LAB/package.json" "$LAB/tsconfig.json" "$LAB"/src/*.ts "$LAB"/style/*.css \
  "$staging/package.json" | sha256sum | cut -d' ' -f1)
stamp=$LAB/pyrualean_lab/labextension/.pyrualean-build
if [[ ! -f $stamp || $(cat "$stamp") != "$want" ]]; then
  log "building the JupyterLab extension ($LAB)"
  (cd "$LAB" && rm -rf lib tsconfig.tsbuildinfo && npx tsc &&
    PATH=$VENV/bin:$PATH jupyter labextension build --core-package-file "$staging/package.json" . >/dev/null)
  echo "$want" >"$stamp"
fi

mkdir -p "$VENV/share/jupyter/labextensions" "$VENV/etc/jupyter/jupyter_server_config.d" "$VENV/etc/jupyter/labconfig/page_config.d"
ln -sfn "$ROOT/$LAB/pyrualean_lab/labextension" "$VENV/share/jupyter/labextensions/pyrualean-lab"
cp "$LAB/jupyter-config/jupyter_server_config.d/pyrualean_lab.json" "$VENV/etc/jupyter/jupyter_server_config.d/"
# Lab's news prompt left out: it asks every person on first open, and this machine may be offline.
cp "$LAB/jupyter-config/labconfig/page_config.d/pyrualean_lab.json" "$VENV/etc/jupyter/labconfig/page_config.d/"
if ! "$VENV/bin/python" -c 'import pyrualean_lab' 2>/dev/null; then
  log "installing pyrualean_lab (server extension)"
  "$VENV/bin/pip" install -q --disable-pip-version-check --no-deps -e "$LAB"
fi
