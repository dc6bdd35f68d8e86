#!/usr/bin/env bash
# Starts one TFF worker (TFF 0.87's C++ worker_binary) from the project's environment on this host and prints the
# address to give run_experiment's --workers. Runs in the foreground until stopped (Ctrl-C or kill).
#
#   bash tools/start_worker.sh [--port=P] [--cache_dir=DIR] [--insecure_listen_on_all_interfaces]
#
# The worker has no TLS and no authentication: whoever reaches its port can run code as this user. It therefore
# listens on loopback only (utils/loopback.py), and a run on another host reaches it through an SSH tunnel that the
# run opens itself: --workers=ssh://USER@THIS_HOST:P (docs/operations.md, "Several machines").
# --insecure_listen_on_all_interfaces binds every interface instead, for a private network the user trusts; it
# prints a warning at start. Tasks that read files (emnist, cifar, stackoverflow, tfds tasks) need them on this host
# at the same path as on the host that runs run_experiment; with --cache_dir, TFF's databases there are indexed by
# client first (tasks/tff_files.py: a client's read is then a lookup, not a scan of the file).
set -euo pipefail
cd "$(dirname "$(readlink -f "${BASH_SOURCE[0]}")")/.."  # The source tree, also from Bazel's runfiles.
port=8000
cache_dir=""
all_interfaces=0
for arg in "$@"; do
  case "$arg" in
    --port=*) port="${arg#--port=}" ;;
    --cache_dir=*) cache_dir="${arg#--cache_dir=}" ;;
    --insecure_listen_on_all_interfaces) all_interfaces=1 ;;
    *) echo "usage: bash tools/start_worker.sh [--port=P] [--cache_dir=DIR] [--insecure_listen_on_all_interfaces]" >&2
       exit 2 ;;
  esac
done
if [[ ! "$port" =~ ^[0-9]+$ ]] || (( port < 1 || port > 65535 )); then
  echo "start_worker: --port must be a number in 1-65535; got '$port'." >&2
  exit 2
fi
if [[ -n "$cache_dir" && ! -d "$cache_dir" ]]; then
  echo "start_worker: --cache_dir $cache_dir is not a directory." >&2
  exit 2
fi
[[ -x .venv/bin/python ]] || bash tools/bootstrap.sh
if [[ -n "$cache_dir" ]]; then
  TF_CPP_MIN_LOG_LEVEL=3 PYTHONPATH=. .venv/bin/python -c 'import sys; from tasks import tff_files; tff_files.index_databases(sys.argv[1])' \
    "$cache_dir" 2>&1 | grep -v -e 'TF-TRT' -e 'oneDNN' -e 'cpu_feature_guard' -e 'rebuild TensorFlow' || true
fi
export MALLOC_ARENA_MAX="${MALLOC_ARENA_MAX:-2}"  # As utils/execution_context.py gives the local worker.
export TF_CPP_MIN_LOG_LEVEL="${TF_CPP_MIN_LOG_LEVEL:-2}"
if (( all_interfaces )); then
  binary="$(PYTHONPATH=. .venv/bin/python -c 'from utils import remote_workers; print(remote_workers.worker_binary_path())' 2>/dev/null | tail -1)"
  echo "WARNING: --insecure_listen_on_all_interfaces: this TFF worker listens on every interface of $(hostname) on" \
    "port $port with no TLS and no authentication; anyone who can reach it can run code as $(id -un)." >&2
  PYTHONPATH=. .venv/bin/python -c 'import sys; from utils import worker_host; sys.exit(worker_host.check_port(int(sys.argv[1])))' \
    "$port" || exit 2
  echo "TFF worker listening on every interface, port $port: run_experiment.py --workers=$(hostname):$port"
  exec "$binary" --port="$port" --max_concurrent_computation_calls=-1
fi
# On loopback: utils/worker_host.py refuses a port already in use, starts the worker with the loopback preload,
# reads its listening sockets and stops it (one line, exit 2) unless they are all loopback.
exec env PYTHONPATH=. .venv/bin/python -m utils.worker_host --port="$port" --user="$(id -un)"
