#!/usr/bin/env bash
# Installs from Debian's archive what OCR of attachments needs (Tesseract 5 with its English
# and orientation data) and what its tests draw their images with (Pillow and the DejaVu
# fonts); with --bench also the `tesseract` program the OCR benchmark compares with.
# Idempotent: installs only the packages dpkg does not list as installed; prints nothing
# when there is nothing to do.
#
#   scripts/setup-ocr.sh [--bench]
#
# More OCR languages: apt-get install tesseract-ocr-deu (etc.), then list them under
# attachments.ocr.languages in axocoatl.yaml.
set -euo pipefail

PACKAGES=(libtesseract5 tesseract-ocr-eng tesseract-ocr-osd python3-pil fonts-dejavu-core)
if [ "${1:-}" = "--bench" ]; then
    PACKAGES+=(tesseract-ocr)
fi

log() { echo "setup-ocr: $*" >&2; }

if ! command -v dpkg-query >/dev/null 2>&1 || ! command -v apt-get >/dev/null 2>&1; then
    log "not a Debian-like system: install Tesseract 5 with English data, Python 3 with Pillow and the DejaVu fonts by hand (${PACKAGES[*]} on Debian)"
    exit 1
fi

missing=()
for p in "${PACKAGES[@]}"; do
    if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
        missing+=("$p")
    fi
done
[ "${#missing[@]}" -eq 0 ] && exit 0

as_root=()
if [ "$(id -u)" -ne 0 ]; then
    if ! command -v sudo >/dev/null 2>&1; then
        log "needs root to install ${missing[*]}: run as root, or apt-get install them"
        exit 1
    fi
    as_root=(sudo)
fi
export DEBIAN_FRONTEND=noninteractive
install() {
    "${as_root[@]}" apt-get install -y -qq --no-install-recommends \
        -o DPkg::Lock::Timeout=300 "${missing[@]}" >&2
}
log "installing ${missing[*]}"
# A fresh machine has no package lists yet: fetch them once and try again.
if ! install; then
    "${as_root[@]}" apt-get update -qq -o DPkg::Lock::Timeout=300 >&2
    install
fi
