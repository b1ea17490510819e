# Sourced by scripts/fetch-model.sh and scripts/fetch-embedder.sh (not run on its own):
# `axocoatl ARGS...` runs $AXOCOATL_BIN when set, else the release build of this checkout
# through cargo (built on first use).
axocoatl() {
    if [ -n "${AXOCOATL_BIN:-}" ]; then
        "$AXOCOATL_BIN" "$@"
    else
        cargo run --quiet --release --manifest-path "$repo_root/Cargo.toml" -- "$@"
    fi
}
