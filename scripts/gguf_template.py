#!/usr/bin/env python3
"""Copies a GGUF model file with another chat template (`tokenizer.chat_template`).

    scripts/gguf_template.py FROM.gguf TO.gguf TEMPLATE_FILE

scripts/soak.sh uses it to make model files with hostile templates. Only the header is
rewritten; the tensor data is copied as it is (its offsets are relative to the start of the
data, which stays aligned as the file says).
"""
import struct
import sys

KEY = b"tokenizer.chat_template"
SIZES = {0: 1, 1: 1, 7: 1, 2: 2, 3: 2, 4: 4, 5: 4, 6: 4, 10: 8, 11: 8, 12: 8}


def main(src, dst, template_file):
    data = open(src, "rb").read()
    template = open(template_file, "rb").read()
    at = 0

    def take(n):
        nonlocal at
        piece = data[at:at + n]
        at += n
        return piece

    def u32():
        return struct.unpack("<I", take(4))[0]

    def u64():
        return struct.unpack("<Q", take(8))[0]

    def skip(ty):
        nonlocal at
        if ty in SIZES:
            at += SIZES[ty]
        elif ty == 8:
            n = u64()  # read before `at` is: `at += u64()` would lose the length's 8 bytes
            at += n
        elif ty == 9:
            item, count = u32(), u64()
            if item in SIZES:
                at += SIZES[item] * count
            else:
                for _ in range(count):
                    skip(item)
        else:
            raise SystemExit(f"{src}: GGUF value type {ty} is unknown")

    if take(4) != b"GGUF":
        raise SystemExit(f"{src} is not a GGUF file")
    version, tensors, kvs = u32(), u64(), u64()
    kept, count, alignment = [], 0, 32
    for _ in range(kvs):
        start = at
        key = take(u64())
        ty = u32()
        value_at = at
        skip(ty)
        if key == b"general.alignment":
            alignment = struct.unpack("<I", data[value_at:value_at + 4])[0]
        if key != KEY:
            kept.append(data[start:at])
            count += 1
    infos = at
    for _ in range(tensors):
        take(u64())
        dims = u32()
        at += 8 * dims + 4 + 8
    infos = data[infos:at]
    start_of_data = -(-at // alignment) * alignment

    out = bytearray(b"GGUF")
    out += struct.pack("<IQQ", version, tensors, count + 1)
    for kv in kept:
        out += kv
    out += struct.pack("<Q", len(KEY)) + KEY + struct.pack("<IQ", 8, len(template)) + template
    out += infos
    out += b"\0" * (-len(out) % alignment)
    with open(dst, "wb") as f:
        f.write(out)
        f.write(data[start_of_data:])


if __name__ == "__main__":
    if len(sys.argv) != 4:
        raise SystemExit(__doc__)
    main(*sys.argv[1:])
