# Sourced by scripts/dlio-e2e and scripts/mlpstorage-e2e (after `cd` to the repository, with
# DLIO_SRC and OUT set): finds Python 3.12, installs MPI, DLIO, the real s3dlio (S3DLIO_VERSION,
# and 0.9.106 beside it), s3torchconnector, minio and sluice's wheel into VENV, writes the
# stand-in s3dlio, defines the helpers both scripts use and starts `sluice serve` on CPU 0
# (SERVER, stopped on exit; `start_server ARGS...` and `stop_server` start it afresh, as
# dlio-e2e does per run; NO_SERVER=1: not at setup). ME names the script in messages.
# `command -v python3.12` may name a pyenv shim that refuses to run: ask each candidate.
if [ -z "${PY:-}" ]; then
  for c in python3.12 "$HOME/.pyenv/versions/3.12.1/bin/python3.12" /usr/bin/python3.12; do
    if "$c" -c 'import sys; assert sys.version_info[:2] == (3, 12)' 2>/dev/null; then PY=$c; break; fi
  done
fi
[ -n "${PY:-}" ] || { echo "$ME: DLIO needs Python 3.12; set PY" >&2; exit 1; }
VENV=$(realpath -m "${VENV:-target/dlio-venv}")
S3DLIO_VERSION=${S3DLIO_VERSION:-0.10.0}
S3DLIO_OLD=0.9.106 # the version DLIO f6796ed was tested with, beside the current one
PORT=9020 BUCKET=dlio-bench AK=sluice-test-access SK=sluice-test-secret
mkdir -p "$OUT"
export PIP_NO_CACHE_DIR=1 OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1

# --- install (idempotent): MPI, DLIO and its dependencies (no tensorflow: framework pytorch),
# the real s3dlio kept outside the venv (enabled per run with PYTHONPATH), sluice's wheel.
if ! command -v mpirun >/dev/null; then
  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq openmpi-bin libopenmpi-dev
fi
if [ ! -x "$VENV/bin/python" ]; then
  "$PY" -m venv "$VENV"
  "$VENV/bin/pip" install -q --upgrade pip
  "$VENV/bin/pip" install -q --no-binary=antlr4-python3-runtime --no-binary=mpi4py \
    numpy h5py omegaconf "hydra-core>=1.3.2" pandas pillow psutil pyyaml typing-extensions \
    "dgen-py>=0.2.4" pyarrow "pydftracer>=2.0.2" torch mpi4py "maturin>=1.9,<2"
  "$VENV/bin/pip" install -q --no-deps -e "$DLIO_SRC"
fi
# The other libraries DLIO offers (storage_library): in the venv, imported only when chosen.
"$VENV/bin/python" -c 'import s3torchconnector, minio' 2>/dev/null ||
  "$VENV/bin/pip" install -q "s3torchconnector==1.5.0" "minio==7.2.20"
for v in "$S3DLIO_VERSION" "$S3DLIO_OLD"; do
  if [ ! -d "$VENV/s3dlio-$v/s3dlio" ]; then
    "$VENV/bin/pip" install -q --no-deps --only-binary=:all: --target "$VENV/s3dlio-$v" "s3dlio==$v"
  fi
done
if [ -z "${SKIP_BUILD:-}" ]; then
  rm -rf "$OUT/wheels" # one wheel to install, whatever earlier builds left
  echo "$ME: building sluice's wheel for $("$VENV/bin/python" -V) (release)" >&2
  . scripts/lib/wheel.sh
  build_wheel "$VENV/bin/maturin" "$VENV/bin/python" "$OUT/wheels"
  "$VENV/bin/pip" install -q --force-reinstall --no-deps "$OUT"/wheels/sluice-*.whl
  cargo build --release -q -p sluice-cli
fi

# A stand-in s3dlio that fails on import: on PYTHONPATH in sluice runs, so any process that
# the alias did not reach fails instead of quietly using the real library.
mkdir -p "$OUT/stand-in/s3dlio"
echo 'raise ImportError("real s3dlio imported in a sluice run: the alias missed this process")' \
  > "$OUT/stand-in/s3dlio/__init__.py"

# --- the server on CPU 0. A port that already answers (an earlier run still going) would be
# measured instead.
start_server() { # ARGS... (after the common ones)
  if (echo > /dev/tcp/127.0.0.1/$PORT) 2>/dev/null; then
    echo "$ME: something already answers on port $PORT (an earlier run?); stop it first" >&2
    exit 1
  fi
  taskset -c 0 target/release/sluice serve --no-https --addr 127.0.0.1:$PORT --bucket $BUCKET \
    ${SERVER_PROFILE:+--profile "$SERVER_PROFILE"} --access-key $AK --secret-key $SK "$@" \
    > "$OUT/server.log" 2>&1 &
  SERVER=$!
  for _ in $(seq 300); do
    grep -q '^ready' "$OUT/server.log" 2>/dev/null && return 0
    kill -0 $SERVER 2>/dev/null || break
    sleep 0.1
  done
  echo "$ME: sluice serve did not start on port $PORT:" >&2
  cat "$OUT/server.log" >&2
  exit 1
}
stop_server() { # waits, so that --stats-json is written and the port is free
  [ -n "${SERVER:-}" ] || return 0
  kill "$SERVER" 2>/dev/null || true
  wait "$SERVER" 2>/dev/null || true
  SERVER=
}
trap stop_server EXIT
[ -n "${NO_SERVER:-}" ] || start_server

# How a process gets LIB: PP, its PYTHONPATH; ALIAS, the arguments that go before the program
# (`-m MODULE` or `-c CODE`); SLIB, DLIO's storage_library. Every run but the real s3dlio's
# has the stand-in s3dlio on its path: DLIO's npz generator uses s3dlio whenever it imports.
library() { # LIB
  PP=$OUT/stand-in ALIAS=() SLIB=$1
  case $1 in
    sluice) ALIAS=(-m sluice.compat.alias) SLIB=s3dlio ;;
    s3dlio) PP=$VENV/s3dlio-$S3DLIO_VERSION ;;
    s3dlio-"$S3DLIO_OLD") PP=$VENV/s3dlio-$S3DLIO_OLD SLIB=s3dlio ;;
    s3torchconnector | minio) ;;
    *) echo "$ME: unknown library $1" >&2; return 2 ;;
  esac
}
LIBRARIES="sluice s3dlio s3dlio-$S3DLIO_OLD s3torchconnector minio"

metric() { # LOG PATTERN -> the number after it, or nothing
  grep -o "$2: [0-9.]*" "$1" | awk '{print $NF}' | tail -1
}
# Why a run failed: its last error line (a traceback's last line names the exception).
why() {
  if grep -q '^peak_rss: killed after' "$1"; then grep '^peak_rss: killed after' "$1" | cut -c1-40; return; fi
  # `|| true`: a log without an error line says nothing, under `set -e` too.
  grep -E '(Error|Exception|error:)' "$1" | grep -v '^\s*File ' | tail -1 | cut -c1-160 || true
}
median() { sort -n | awk '{a[NR]=$1} END {if (NR) print (NR % 2) ? a[(NR+1)/2] : (a[NR/2] + a[NR/2+1]) / 2}'; }
