"""A third, minimal Llama forward pass: numpy, float64, straight from the GGUF.

It exists to check the transformers reference, not to replace it. It reads
the tensors in GGUF layout (Q and K rows already permuted by the converter
for adjacent-pair rotary embedding, as llama.cpp and our engine use them), so
it shares no weight-handling code with transformers apart from gguf-py's
dequantisation. Only what SmolLM2 needs: tied embeddings, GQA, no biases.
"""

import numpy as np
from gguf import GGUFReader
from gguf.quants import dequantize


class NpLlama:
    def __init__(self, path):
        r = GGUFReader(path)
        f = {k: v.contents() for k, v in r.fields.items()
             if k.startswith("llama.") or k == "general.architecture"}
        self.n_layer = f["llama.block_count"]
        self.n_head = f["llama.attention.head_count"]
        self.n_kv = f["llama.attention.head_count_kv"]
        self.eps = f["llama.attention.layer_norm_rms_epsilon"]
        self.base = f["llama.rope.freq_base"]
        # dequantize gives rows of ne0 elements: shape (out, in) for matrices
        self.w = {t.name: dequantize(t.data, t.tensor_type).astype(np.float64)
                  .reshape([int(x) for x in reversed(t.shape)]) for t in r.tensors}
        self.n_embd = self.w["token_embd.weight"].shape[1]
        self.hd = self.n_embd // self.n_head

    def _norm(self, x, w):
        return x / np.sqrt(np.mean(x * x, axis=-1, keepdims=True) + self.eps) * w

    def _rope(self, x):
        """x: (n_tok, heads, hd); rotates adjacent pairs (2i, 2i+1)."""
        n = x.shape[0]
        inv = self.base ** (-np.arange(0, self.hd, 2) / self.hd)
        ang = np.arange(n)[:, None] * inv[None, :]
        c, s = np.cos(ang)[:, None, :], np.sin(ang)[:, None, :]
        a, b = x[..., 0::2], x[..., 1::2]
        out = np.empty_like(x)
        out[..., 0::2] = a * c - b * s
        out[..., 1::2] = a * s + b * c
        return out

    def logits(self, ids):
        """Logits of the last position for a whole prompt, float64."""
        w, n = self.w, len(ids)
        x = w["token_embd.weight"][ids]
        mask = np.triu(np.full((n, n), -np.inf), 1)
        group = self.n_head // self.n_kv
        for i in range(self.n_layer):
            p = "blk.%d." % i
            h = self._norm(x, w[p + "attn_norm.weight"])
            q = self._rope((h @ w[p + "attn_q.weight"].T).reshape(n, self.n_head, self.hd))
            k = self._rope((h @ w[p + "attn_k.weight"].T).reshape(n, self.n_kv, self.hd))
            v = (h @ w[p + "attn_v.weight"].T).reshape(n, self.n_kv, self.hd)
            k = np.repeat(k, group, axis=1)
            v = np.repeat(v, group, axis=1)
            att = np.einsum("qhd,khd->hqk", q, k) / np.sqrt(self.hd) + mask
            att = np.exp(att - att.max(-1, keepdims=True))
            att /= att.sum(-1, keepdims=True)
            o = np.einsum("hqk,khd->qhd", att, v).reshape(n, self.n_embd)
            x = x + o @ w[p + "attn_output.weight"].T
            h = self._norm(x, w[p + "ffn_norm.weight"])
            g = h @ w[p + "ffn_gate.weight"].T
            u = h @ w[p + "ffn_up.weight"].T
            x = x + (g / (1 + np.exp(-g)) * u) @ w[p + "ffn_down.weight"].T
        x = self._norm(x[-1], w["output_norm.weight"])
        return w["token_embd.weight"] @ x
