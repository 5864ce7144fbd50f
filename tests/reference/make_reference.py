#!/usr/bin/env python3
"""Regenerate the reference fixtures the C tests compare against.

The one idea: every expected value comes from an implementation that is not
ours. Token ids come from llama.cpp's llama-tokenize; greedy continuations
come from Hugging Face transformers running the same GGUF dequantised to
float32 on the CPU. The texts themselves live in texts.py.

Subcommands (run from anywhere; paths are resolved from the repo root):
  texts      write strings.json and prompts.json from texts.py
  tokenizer  write tokenizer.json (needs llama-tokenize)
  greedy     write greedy.json (needs llama-tokenize, torch, transformers)
  check      compare transformers' own GGUF tokenizer with llama.cpp, and
             KV-cached decoding with full recomputation (prints, writes nothing)
  llamacpp   compare greedy.json with llama.cpp's llama-server (optional;
             prints, writes nothing)
  numpy      compare greedy.json with np_llama.py, an independent float64
             forward pass (prints, writes nothing; --full: whole greedy runs)
  all        texts, tokenizer, greedy
"""

import argparse
import hashlib
import json
import os
import subprocess
import sys
import tempfile
import unicodedata
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
sys.path.insert(0, str(HERE))
import texts  # noqa: E402

MODEL = "models/SmolLM2-135M-Instruct.Q4_1.gguf"
MODEL_SHA256 = "b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53"
OTHER_VOCABS = [
    "models/vocab/ggml-vocab-llama-spm.gguf",
    "models/vocab/ggml-vocab-llama-bpe.gguf",
    "models/vocab/ggml-vocab-qwen2.gguf",
]
N_SUBSET = 80  # strings per non-default vocabulary
# Strings every vocabulary sees: the places where pre-tokenizers differ most
# (case-insensitive contractions, digit grouping, whitespace runs, scripts).
SUBSET_ALWAYS = (
    "empty", "long_text_3000", "contr_upper_S", "contr_mixed_case", "contr_s",
    "num_20", "num_thousands", "num_decimal", "ws_many_spaces", "ws_newlines_text",
    "ws_mixed", "ws_leading_spaces", "code_py_deep_indent", "code_py_tabs",
    "emoji_zwj_family", "zh_paragraph", "ja_mixed", "ko_jamo_decomposed",
    "combining_decomposed", "single_emoji",
)
N_PREDICT = 32
DEFAULT_TOKENIZE = ("/opt/src/llama_cpp_python-0.3.36/vendor/llama.cpp/"
                    "build/bin/llama-tokenize")
DEFAULT_SERVER = ("/opt/src/llama_cpp_python-0.3.36/vendor/llama.cpp/"
                  "build/bin/llama-server")

# Token types (gguf / llama.cpp): the texts of these tokens are what
# special-token splitting looks for. 2 unknown, 3 control, 4 user-defined.
SPECIAL_TYPES = (2, 3, 4)


# ---------------------------------------------------------------- JSON output

def _escape_invisible(s):
    """JSON text keeps CJK and emoji readable, but invisible or ambiguous
    characters (format, control, separators, odd spaces, private use) are
    written as \\u escapes so a reviewer can see them."""
    out = []
    for ch in s:
        cat = unicodedata.category(ch)
        cp = ord(ch)
        if cp == 0x7F or cp > 0x7F and (cat[0] in "CZ" or 0xFE00 <= cp <= 0xFE0F
                                        or 0xE0100 <= cp <= 0xE01EF):
            if cp > 0xFFFF:
                cp -= 0x10000
                out.append("\\u%04x\\u%04x" % (0xD800 + (cp >> 10), 0xDC00 + (cp & 0x3FF)))
            else:
                out.append("\\u%04x" % cp)
        else:
            out.append(ch)
    return "".join(out)


def _dump_value(v):
    return _escape_invisible(json.dumps(v, ensure_ascii=False, sort_keys=True,
                                        separators=(",", ":")))


def write_json(path, top):
    """Top-level keys sorted; each case is one block with one key per line
    and values written compactly, so diffs stay small and reviewable."""
    lines = ["{"]
    keys = sorted(top)
    for ki, key in enumerate(keys):
        comma = "," if ki + 1 < len(keys) else ""
        val = top[key]
        if isinstance(val, list) and val and isinstance(val[0], dict):
            lines.append("  %s: [" % json.dumps(key))
            for ci, case in enumerate(val):
                lines.append("    {")
                ck = sorted(case)
                for j, k in enumerate(ck):
                    c2 = "," if j + 1 < len(ck) else ""
                    lines.append("      %s: %s%s" % (json.dumps(k), _dump_value(case[k]), c2))
                lines.append("    }" + ("," if ci + 1 < len(val) else ""))
            lines.append("  ]" + comma)
        else:
            lines.append("  %s: %s%s" % (json.dumps(key), _dump_value(val), comma))
    lines.append("}")
    text = "\n".join(lines) + "\n"
    json.loads(text)  # never write something that does not parse back
    Path(path).write_text(text, encoding="utf-8")
    print("wrote %s (%d bytes)" % (Path(path).relative_to(ROOT), len(text.encode())))


def read_json(name):
    return json.loads((HERE / name).read_text(encoding="utf-8"))


# ---------------------------------------------------------------- llama.cpp

class LlamaTokenize:
    """Runs llama-tokenize once per text, reading the text from a file
    verbatim (--no-escape: backslashes in code and JSON stay as written)."""

    def __init__(self, exe):
        self.exe = exe
        if not os.access(exe, os.X_OK):
            sys.exit("llama-tokenize not found at %s (use --llama-tokenize)" % exe)
        self.tmp = tempfile.TemporaryDirectory()
        self._default_bos = {}

    def version(self):
        r = subprocess.run([self.exe, "--version"], capture_output=True, text=True)
        return " ".join((r.stdout + r.stderr).split("\n")[0].split()[1:])

    def ids(self, vocab, text, parse_special, no_bos=False):
        path = os.path.join(self.tmp.name, "text")
        with open(path, "wb") as f:
            f.write(text.encode("utf-8"))
        cmd = [self.exe, "-m", str(ROOT / vocab), "-f", path, "--ids",
               "--no-escape", "--log-disable"]
        if not parse_special:  # llama-tokenize parses special text by default
            cmd.append("--no-parse-special")
        if no_bos:
            cmd.append("--no-bos")
        r = subprocess.run(cmd, capture_output=True)
        if r.returncode != 0:
            raise RuntimeError("llama-tokenize failed: %s" % r.stderr.decode(errors="replace"))
        last = r.stdout.decode().strip().split("\n")[-1]
        return json.loads(last)

    def default_add_bos(self, vocab):
        """llama-tokenize adds BOS exactly when the vocabulary asks for it;
        the empty text shows whether it does."""
        if vocab not in self._default_bos:
            self._default_bos[vocab] = len(self.ids(vocab, "", False)) > 0
        return self._default_bos[vocab]


def special_texts(vocab):
    from gguf import GGUFReader
    r = GGUFReader(str(ROOT / vocab))
    toks = r.fields["tokenizer.ggml.tokens"].contents()
    types = r.fields["tokenizer.ggml.token_type"].contents()
    return [t for t, ty in zip(toks, types) if ty in SPECIAL_TYPES]


def has_special(text, specials):
    return any(s in text for s in specials)


# ---------------------------------------------------------------- texts

def render_chat(messages, template):
    """Render with transformers' own chat-template machinery, and check it
    against plain Jinja2 so the rendering does not depend on either."""
    import jinja2
    from transformers.utils.chat_template_utils import render_jinja_template
    rendered, _ = render_jinja_template(conversations=[messages], chat_template=template,
                                        add_generation_prompt=True)
    env = jinja2.Environment(trim_blocks=True, lstrip_blocks=True)
    plain = env.from_string(template).render(messages=messages, add_generation_prompt=True)
    if rendered[0] != plain:
        raise RuntimeError("transformers and jinja2 render the chat template differently")
    return plain


def chat_template():
    from gguf import GGUFReader
    return GGUFReader(str(ROOT / MODEL)).fields["tokenizer.chat_template"].contents()


def cmd_texts(_args):
    write_json(HERE / "strings.json", {
        "note": "written for llmd's tokenizer tests; the source is texts.py",
        "cases": [{"name": n, "text": t} for n, t in texts.STRINGS],
    })
    tmpl = chat_template()
    prompts = []
    for p in texts.PROMPTS:
        case = {"name": p["name"], "chat": "messages" in p}
        if case["chat"]:
            case["messages"] = p["messages"]
            case["text"] = render_chat(p["messages"], tmpl)
        else:
            case["text"] = p["text"]
        prompts.append(case)
    write_json(HERE / "prompts.json", {
        "note": ("chat prompts are rendered with the GGUF's tokenizer.chat_template, "
                 "add_generation_prompt=true; the source is texts.py"),
        "cases": prompts,
    })


# ---------------------------------------------------------------- tokenizer

def subset(strings):
    """About N_SUBSET strings: every one holding special-token text of any
    vocabulary, the long text, and an even spread over the rest."""
    forced = [i for i, (n, t) in enumerate(strings)
              if n.startswith("special_") or n in SUBSET_ALWAYS]
    missing = set(SUBSET_ALWAYS) - {n for n, _ in strings}
    if missing:
        sys.exit("SUBSET_ALWAYS names strings that do not exist: %s" % sorted(missing))
    rest = [i for i in range(len(strings)) if i not in forced]
    k = N_SUBSET - len(forced)
    picked = {rest[(j * len(rest)) // k] for j in range(k)}
    return sorted(set(forced) | picked)


def cmd_tokenizer(args):
    lt = LlamaTokenize(args.llama_tokenize)
    strings = [(c["name"], c["text"]) for c in read_json("strings.json")["cases"]]
    cases = []
    plan = [(MODEL, list(range(len(strings))))]
    for v in OTHER_VOCABS:
        plan.append((v, subset(strings)))
    for vocab, idxs in plan:
        specials = special_texts(vocab)
        add_bos = lt.default_add_bos(vocab)
        n_before = len(cases)
        for i in idxs:
            name, text = strings[i]
            for ps in ([False, True] if has_special(text, specials) else [False]):
                cases.append({"vocab": vocab, "name": name, "text": text,
                              "add_bos": add_bos, "parse_special": ps,
                              "ids": lt.ids(vocab, text, ps)})
        print("%s: %d cases (add_bos %s)" % (vocab, len(cases) - n_before, add_bos))
    write_json(HERE / "tokenizer.json", {
        "generator": ("llama.cpp %s (the tree vendored in llama-cpp-python 0.3.36): "
                      "llama-tokenize -m VOCAB -f TEXTFILE --ids --no-escape --log-disable "
                      "[--no-parse-special]; add_bos is the vocabulary's default" % lt.version()),
        "cases": cases,
    })


# ---------------------------------------------------------------- greedy

def sha256(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def load_model():
    import torch
    from transformers import AutoModelForCausalLM
    torch.set_num_threads(1)  # one thread: the same summation order every run
    model = AutoModelForCausalLM.from_pretrained(
        str(ROOT / "models"), gguf_file=Path(MODEL).name,
        dtype=torch.float32, attn_implementation="eager")
    model.eval()
    return model


def ranked(logits, k):
    """Top-k of a float32 logit vector; exact ties go to the lower id."""
    import numpy as np
    order = np.lexsort((np.arange(len(logits)), -logits))[:k]
    return [(int(i), float(logits[i])) for i in order]


def greedy(model, prompt_ids, n, use_cache=True):
    """n greedy steps, never stopping at EOS. Returns per-step rankings."""
    import torch
    steps = []
    ids = list(prompt_ids)
    with torch.no_grad():
        out = model(input_ids=torch.tensor([ids]), use_cache=use_cache)
        for _ in range(n):
            logits = out.logits[0, -1].float().numpy()
            top = ranked(logits, 10)
            steps.append(top)
            ids.append(top[0][0])
            if use_cache:
                out = model(input_ids=torch.tensor([[top[0][0]]]),
                            past_key_values=out.past_key_values, use_cache=True)
            else:
                out = model(input_ids=torch.tensor([ids]), use_cache=False)
    return steps


def r6(x):
    return round(x, 6)


def cmd_greedy(args):
    import torch
    import transformers
    if sha256(ROOT / MODEL) != MODEL_SHA256:
        sys.exit("%s does not have the expected SHA-256" % MODEL)
    lt = LlamaTokenize(args.llama_tokenize)
    if lt.default_add_bos(MODEL):
        sys.exit("expected SmolLM2 not to add BOS (tokenizer.ggml.add_bos_token)")
    from transformers import AutoTokenizer
    tok = AutoTokenizer.from_pretrained(str(ROOT / "models"), gguf_file=Path(MODEL).name)
    model = load_model()
    cases = []
    for p in read_json("prompts.json")["cases"]:
        prompt_ids = lt.ids(MODEL, p["text"], p["chat"])
        steps = greedy(model, prompt_ids, N_PREDICT)
        case = {
            "name": p["name"], "chat": p["chat"], "text": p["text"],
            "prompt_ids": prompt_ids,
            "ids": [s[0][0] for s in steps],
            "gap": [r6(s[0][1] - s[1][1]) for s in steps],
            "top5": [[[i, r6(x)] for i, x in s[:5]] for s in steps],
            "logits_first": [[i, r6(x)] for i, x in steps[0]],
            # for a reader only: the tests compare ids, not this text
            "completion": tok.decode([s[0][0] for s in steps]),
        }
        ties = [j for j, g in enumerate(case["gap"]) if g < 1e-3]
        print("%-22s prompt %4d tokens, min gap %.4f%s" % (
            p["name"], len(prompt_ids), min(case["gap"]),
            ", near ties at steps %s" % ties if ties else ""))
        cases.append(case)
    write_json(HERE / "greedy.json", {
        "generator": "transformers %s / torch %s, float32, GGUF dequantised" % (
            transformers.__version__, torch.__version__),
        "prompt_ids_generator": "llama.cpp %s llama-tokenize (parse_special for chat prompts)"
                                % lt.version(),
        "model": Path(MODEL).name,
        "model_sha256": MODEL_SHA256,
        "n_predict": N_PREDICT,
        "cases": cases,
    })


# ---------------------------------------------------------------- checks

def first_difference(a, b):
    j = next((k for k, (x, y) in enumerate(zip(a, b)) if x != y), min(len(a), len(b)))
    return "first difference at token %d: transformers %s, llama.cpp %s" % (
        j, a[j:j + 4], b[j:j + 4])


def hf_tokenizers():
    """transformers' tokenizer as built from the GGUF, and the same with the
    digit splitter that SmolLM2's own tokenizer.json puts before the
    byte-level step (llama.cpp's 'smollm' pre-tokenizer splits digits too;
    the GGUF-to-tokenizers conversion in transformers leaves it out)."""
    import copy
    from tokenizers import pre_tokenizers
    from transformers import AutoTokenizer
    tok = AutoTokenizer.from_pretrained(str(ROOT / "models"), gguf_file=Path(MODEL).name)
    fixed = copy.deepcopy(tok)
    fixed.backend_tokenizer.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Digits(individual_digits=True),
        pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)])
    return [("as loaded from the GGUF", tok), ("with digit splitting", fixed)]


def cmd_check(args):
    """transformers' tokenizer (built from the same GGUF) against llama.cpp,
    and KV-cached decoding against full recomputation. transformers always
    splits out special-token text, so strings holding it are compared with
    llama.cpp's parse_special=true ids only."""
    specials = special_texts(MODEL)
    tk = [c for c in read_json("tokenizer.json")["cases"] if c["vocab"] == MODEL
          and c["parse_special"] == has_special(c["text"], specials)]
    gr = read_json("greedy.json")["cases"]
    for label, tok in hf_tokenizers():
        bad = [c["name"] for c in tk
               if tok(c["text"], add_special_tokens=False)["input_ids"] != c["ids"]]
        print("transformers tokenizer %s: differs from llama.cpp on %d of %d strings %s"
              % (label, len(bad), len(tk), bad))
        for c in gr:
            hf = tok(c["text"], add_special_tokens=False)["input_ids"]
            if hf != c["prompt_ids"]:
                print("  prompt %s: %s" % (c["name"], first_difference(hf, c["prompt_ids"])))
        print("  prompts: same on %d of %d" % (sum(
            tok(c["text"], add_special_tokens=False)["input_ids"] == c["prompt_ids"]
            for c in gr), len(gr)))
    model = load_model()
    for c in gr:
        if len(c["prompt_ids"]) > 200:
            continue  # full recomputation of the long prompt is slow on CPU
        steps = greedy(model, c["prompt_ids"], N_PREDICT, use_cache=False)
        ids = [s[0][0] for s in steps]
        worst = max(abs(a[1] - b[1]) for s, t in zip(steps, c["top5"]) for a, b in zip(s, t))
        print("recompute %-22s %s, max top-5 logit diff %.2e" % (
            c["name"], "same ids" if ids == c["ids"] else "DIFFERENT ids", worst))


def llamacpp_step(port, ids):
    """One greedy token from llama-server with its top-5 log-probabilities.
    One request per token, so an end-of-generation token does not stop the
    run (ignore_eos would instead bias those tokens to -inf and change the
    answer); the server's prompt cache keeps this cheap."""
    import urllib.request
    body = json.dumps({"prompt": ids, "n_predict": 1, "temperature": 0.0, "top_k": 1,
                       "samplers": ["top_k"], "cache_prompt": True, "n_probs": 5,
                       "return_tokens": True}).encode()
    req = urllib.request.Request("http://127.0.0.1:%d/completion" % port, data=body,
                                 headers={"Content-Type": "application/json"})
    r = json.loads(urllib.request.urlopen(req, timeout=300).read())
    if r.get("completion_probabilities"):
        p = r["completion_probabilities"][0]
        return p["id"], [(t["id"], t["logprob"]) for t in p["top_logprobs"]]
    # the server holds back probabilities for a token that ends inside a
    # UTF-8 sequence; the id still comes back
    return r["tokens"][0], None


def cmd_llamacpp(args):
    """Greedy decoding in llama.cpp's server from the same prompt ids, with
    transformers' choices fed back so that every step is compared on the same
    context. A difference of top-2 log-probabilities is a difference of logits,
    so the gaps compare directly."""
    import time
    import urllib.request
    port = 18089
    srv = subprocess.Popen([args.llama_server, "-m", str(ROOT / MODEL), "--port", str(port),
                            "-c", "4096", "-np", "1", "--no-warmup"],
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        for _ in range(120):
            try:
                urllib.request.urlopen("http://127.0.0.1:%d/health" % port, timeout=1)
                break
            except Exception:
                time.sleep(0.5)
        for c in read_json("greedy.json")["cases"]:
            ids = list(c["prompt_ids"])
            differ, worst = [], 0.0
            for j, want in enumerate(c["ids"]):
                got, top = llamacpp_step(port, ids)
                if got != want:
                    differ.append("step %d: llama.cpp %d, transformers %d (gap %.3f)"
                                  % (j, got, want, c["gap"][j]))
                elif top:
                    worst = max(worst, abs(top[0][1] - top[1][1] - c["gap"][j]))
                ids.append(want)
            print("llama.cpp %-22s %2d/%d same, max |gap difference| %.3f%s" % (
                c["name"], len(c["ids"]) - len(differ), len(c["ids"]), worst,
                "".join("\n    " + d for d in differ)))
    finally:
        srv.terminate()
        srv.wait()


def cmd_numpy(args):
    """The independent numpy float64 forward pass (np_llama.py) against
    greedy.json: first-step top-10 logits for every prompt, and the whole
    32-token greedy run (by full recomputation) for the shorter ones."""
    import numpy as np
    from np_llama import NpLlama
    m = NpLlama(str(ROOT / MODEL))
    for c in read_json("greedy.json")["cases"]:
        ids = list(c["prompt_ids"])
        lg = m.logits(ids)
        worst = max(abs(lg[i] - x) for i, x in c["logits_first"])
        order = np.lexsort((np.arange(len(lg)), -lg))[:10]
        same_top = [int(i) for i in order] == [i for i, _ in c["logits_first"]]
        msg = "max |logit difference| %.2e, top-10 order %s" % (
            worst, "same" if same_top else "DIFFERENT")
        if args.full and len(ids) < 200:
            got = []
            for _ in range(len(c["ids"])):
                nxt = int(np.argmax(m.logits(ids)))
                got.append(nxt)
                ids.append(nxt)
            msg += ", greedy ids %s" % ("same" if got == c["ids"] else "DIFFERENT %s" % got)
        print("numpy %-22s %s" % (c["name"], msg))


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("what", choices=["texts", "tokenizer", "greedy", "check", "llamacpp",
                                     "numpy", "all"])
    ap.add_argument("--full", action="store_true",
                    help="numpy: also redo the whole greedy run for short prompts (slow)")
    ap.add_argument("--llama-tokenize", default=os.environ.get("LLAMA_TOKENIZE", DEFAULT_TOKENIZE))
    ap.add_argument("--llama-server", default=os.environ.get("LLAMA_SERVER", DEFAULT_SERVER))
    args = ap.parse_args()
    steps = {"texts": [cmd_texts], "tokenizer": [cmd_tokenizer], "greedy": [cmd_greedy],
             "check": [cmd_check], "llamacpp": [cmd_llamacpp], "numpy": [cmd_numpy],
             "all": [cmd_texts, cmd_tokenizer, cmd_greedy]}[args.what]
    for step in steps:
        step(args)


if __name__ == "__main__":
    main()
