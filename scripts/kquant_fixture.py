#!/usr/bin/env python3
"""Writes infer/src/kquant/fixture.txt: k-quant blocks and the values gguf-py dequantizes
them to, which the engine's own dequantizers are tested against (an independent
implementation of GGML's block layouts).

    scripts/kquant_fixture.py        # makes the venv under .cache/ once (gguf, numpy)

Each line: the type, one super-block's bytes in hex, then its 256 values as little-endian
f32 in hex. The blocks are random bytes (so every bit of every scale and value field is
exercised) with their half-precision scales set to ordinary magnitudes of both signs, plus
one block of all ones bits for the extremes of each field.
"""
import os
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)

if os.environ.get("KQUANT_FIXTURE_IN_VENV") != "1":
    python = subprocess.run(
        [os.path.join(HERE, "venv.sh"), "gguf-py", "python",
         "./python -c 'import gguf, numpy'", "gguf==0.19.0", "numpy"],
        check=True, stdout=subprocess.PIPE, text=True).stdout.strip()
    env = dict(os.environ, KQUANT_FIXTURE_IN_VENV="1")
    sys.exit(subprocess.run([python, os.path.abspath(__file__)], env=env).returncode)

import numpy as np  # noqa: E402
from gguf import GGMLQuantizationType as T  # noqa: E402
from gguf.quants import dequantize  # noqa: E402

# (type, byte offsets of its f16 scales)
TYPES = [
    ("Q2_K", T.Q2_K, 84, [80, 82]),
    ("Q3_K", T.Q3_K, 110, [108]),
    ("Q4_K", T.Q4_K, 144, [0, 2]),
    ("Q5_K", T.Q5_K, 176, [0, 2]),
    ("Q6_K", T.Q6_K, 210, [208]),
]
BLOCKS = 3

rng = np.random.default_rng(20261206)
lines = []
for name, qtype, size, scale_at in TYPES:
    for i in range(BLOCKS + 1):
        block = bytearray(rng.integers(0, 256, size, dtype=np.uint8).tobytes())
        if i == BLOCKS:
            block = bytearray(b"\xff" * size)
        for at in scale_at:
            scale = np.float16(rng.uniform(1e-4, 0.05) * rng.choice([-1.0, 1.0]))
            block[at:at + 2] = scale.tobytes()
        values = dequantize(np.frombuffer(bytes(block), dtype=np.uint8), qtype)
        values = np.asarray(values, dtype="<f4").reshape(-1)
        assert values.shape == (256,), values.shape
        lines.append(f"{name} {bytes(block).hex()} {values.tobytes().hex()}")

out = os.path.join(ROOT, "infer", "src", "kquant", "fixture.txt")
with open(out, "w") as f:
    f.write("\n".join(lines) + "\n")
print(f"{out}: {len(lines)} blocks")
