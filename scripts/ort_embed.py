"""Reference embeddings from onnxruntime, for the embedder's test and benchmark.

Reads one JSON object on stdin:
  {"model": PATH, "tokenizer": PATH, "texts": [...], "batch": 16, "threads": 1, "repeat": 0}
and writes one JSON object on stdout:
  {"vectors": [[...], ...], "seconds": best time of `repeat` timed passes over all texts}

Same steps as axocoatl's embedder and sentence-transformers: the tokenizer.json padded to
the longest text of a batch and cut at 256 tokens, the model's last_hidden_state mean-pooled
under the attention mask, then L2-normalized. Texts are batched in order of length, as
axocoatl does. Run it with the python of scripts/ort-venv.sh.
"""
import json
import sys
import time

import numpy as np
import onnxruntime as ort
from tokenizers import Tokenizer


def main():
    req = json.load(sys.stdin)
    tok = Tokenizer.from_file(req["tokenizer"])
    tok.enable_padding()  # BatchLongest
    tok.enable_truncation(max_length=256)
    opts = ort.SessionOptions()
    opts.intra_op_num_threads = int(req.get("threads", 1))
    opts.inter_op_num_threads = 1
    sess = ort.InferenceSession(req["model"], opts, providers=["CPUExecutionProvider"])
    texts = req["texts"]
    batch = int(req.get("batch", 16))
    order = sorted(range(len(texts)), key=lambda i: len(texts[i].encode()))

    def run():
        out = [None] * len(texts)
        for start in range(0, len(order), batch):
            idx = order[start:start + batch]
            enc = tok.encode_batch([texts[i] for i in idx])
            ids = np.array([e.ids for e in enc], dtype=np.int64)
            mask = np.array([e.attention_mask for e in enc], dtype=np.int64)
            types = np.array([e.type_ids for e in enc], dtype=np.int64)
            (hidden,) = sess.run(
                ["last_hidden_state"],
                {"input_ids": ids, "attention_mask": mask, "token_type_ids": types},
            )
            m = mask[:, :, None].astype(np.float32)
            pooled = (hidden * m).sum(axis=1) / np.clip(m.sum(axis=1), 1e-9, None)
            pooled /= np.clip(np.linalg.norm(pooled, axis=1, keepdims=True), 1e-12, None)
            for i, v in zip(idx, pooled):
                out[i] = v.tolist()
        return out

    vectors = run()
    best = None
    for _ in range(int(req.get("repeat", 0))):
        t = time.perf_counter()
        run()
        dt = time.perf_counter() - t
        best = dt if best is None else min(best, dt)
    json.dump({"vectors": vectors, "seconds": best}, sys.stdout)


if __name__ == "__main__":
    main()
