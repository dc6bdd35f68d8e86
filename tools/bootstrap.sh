#!/usr/bin/env bash
# Installs everything the suite needs on a fresh Debian machine with Python 3.11: Debian's offline Bazel and the
# project's virtual environment (.venv). Idempotent; when nothing changed it returns in well under a second.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

log() { echo "[bootstrap] $*" >&2; }

as_root() {
  if [ "$(id -u)" -eq 0 ]; then "$@"; else sudo "$@"; fi
}

if ! command -v bazel >/dev/null 2>&1 || [ ! -f /usr/share/bazel/rules/java/WORKSPACE ]; then
  log "installing Debian's bazel-bootstrap and bazel-rules-java"
  as_root apt-get update -qq
  as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq bazel-bootstrap bazel-rules-java >/dev/null
fi

# The real Fashion-MNIST (task fashion_mnist, tasks/fashion_mnist_files.py): four IDX files, 30 MB.
if [ ! -f /usr/share/datasets/fashion-mnist/t10k-labels-idx1-ubyte.gz ]; then
  log "installing Debian's dataset-fashion-mnist"
  as_root apt-get update -qq
  as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq dataset-fashion-mnist >/dev/null
fi

stamp="$(cat requirements.txt requirements.lock requirements-nodeps.txt tools/bootstrap.sh utils/loopback_bind.c |
  sha256sum | cut -c1-16)"
if [ -x .venv/bin/python3 ] && [ "$(head -c 4 .venv/lib/loopback_bind.so 2>/dev/null)" = $'\x7fELF' ] &&
  [ "$(cat .venv/.bootstrap_stamp 2>/dev/null)" = "$stamp" ]; then
  exit 0
fi

python="$(command -v python3.11 || command -v python3)"
if ! "$python" -c 'import sys; sys.exit(sys.version_info[:2] != (3, 11))'; then
  log "Python 3.11 is required (TensorFlow 2.14 / TFF 0.87); found $("$python" --version 2>&1) at $python"
  exit 1
fi
[ -x .venv/bin/python3 ] || { log "creating .venv"; "$python" -m venv .venv; }
log "installing pinned requirements into .venv (a few minutes on a fresh machine)"
pip_install() {
  # Drops the warnings this machine's pip configuration prints about absent local package directories.
  .venv/bin/python3 -m pip install --quiet --disable-pip-version-check "$@" 2>&1 | { grep -v '^WARNING: Location' || true; }
}
pip_install -r requirements.txt -c requirements.lock
# TFF pins jax==0.4.14, which has no wheel here: install it without its dependencies (they are pinned above).
pip_install --no-deps -r requirements-nodeps.txt
.venv/bin/python3 -c 'import tensorflow_federated as tff; assert tff.__version__ == "0.87.0"' 2>/dev/null
# TFF's worker binds every interface; this library, preloaded into it, binds loopback instead (utils/loopback.py).
log "building .venv/lib/loopback_bind.so"
cc -O2 -Wall -shared -fPIC -o .venv/lib/loopback_bind.so.tmp utils/loopback_bind.c -ldl
mv .venv/lib/loopback_bind.so.tmp .venv/lib/loopback_bind.so
echo "$stamp" > .venv/.bootstrap_stamp
log "done"
