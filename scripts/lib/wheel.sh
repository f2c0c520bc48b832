# Sourced by scripts/dist and scripts/dlio-e2e.d/setup.sh (from the repository root): the one
# way sluice's wheel is built, so that a change to it (tags, features, manylinux) reaches both.
# The extension is built for the stable ABI from Python 3.9 (crates/py/Cargo.toml), so the
# wheel is tagged cp39-abi3 whichever Python runs maturin.
#
# build_wheel MATURIN PYTHON DIR: a release wheel, written into DIR, for this machine's glibc.
# build_wheel MATURIN PYTHON DIR manylinux: one that runs on glibc 2.28 and later
#   (manylinux_2_28: RHEL 8, Debian 10, Ubuntu 18.10 and newer), linked by zig against that
#   glibc's symbols (`python -m ziglang`, in MATURIN's venv). Its objects go to cargo's
#   target/x86_64-unknown-linux-gnu, apart from the native builds'.
build_wheel() {
  local extra=()
  if [ "${4:-}" = manylinux ]; then
    extra=(--zig --compatibility manylinux_2_28)
    # maturin runs `zig` from PATH, else `python -m ziglang` of the Python on PATH.
    PATH="$(cd "$(dirname "$1")" && pwd):$PATH"
  fi
  "$1" build --release -q -i "$2" -m crates/py/Cargo.toml -o "$3" "${extra[@]}" >&2
}
