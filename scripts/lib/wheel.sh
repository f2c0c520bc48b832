# Sourced by scripts/dist and scripts/dlio-e2e.d/setup.sh (from the repository root): the one
# way sluice's wheel is built, so that a change to it (tags, features, manylinux) reaches both.
#
# build_wheel MATURIN PYTHON DIR: a release wheel for PYTHON, written into DIR.
build_wheel() {
  "$1" build --release -q -i "$2" -m crates/py/Cargo.toml -o "$3" >&2
}
