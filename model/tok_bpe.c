/*
 * model/tok_bpe.c — byte-level BPE (GPT-2 style, GGUF model "gpt2").
 *
 * Text is first cut into words by the pre-tokenizer's regexes (PCRE2 with
 * Unicode properties, chosen by tokenizer.ggml.pre).  Each byte of a word
 * starts as the token of its GPT-2 stand-in character; then the adjacent pair
 * with the lowest merge rank is merged, again and again, until no pair has a
 * merge.  Symbols hold token ids, so a merge is one hash lookup on an id pair,
 * and a binary heap of candidate pairs keeps a long word O(n log n).
 */
#include <stdlib.h>
#include <string.h>

#include "model/tok_internal.h"

/* ------------------------------------------------------- byte mapping */

/* GPT-2 keeps printable Latin-1 bytes as themselves and moves the rest
 * (controls, space, 0x7F-0xA0, 0xAD) to U+0100 upward, in byte order, so
 * every byte has a visible stand-in that never collides with real text. */
static int tok_bpe_printable(unsigned b)
{
    return (b >= 0x21 && b <= 0x7E) || (b >= 0xA1 && b <= 0xAC) || b >= 0xAE;
}

uint16_t tok_bpe_byte_cp(uint8_t b)
{
    if (tok_bpe_printable(b))
        return b;
    uint16_t n = 0;
    for (unsigned c = 0; c < b; c++)
        n += !tok_bpe_printable(c);
    return (uint16_t)(256 + n);
}

/* Writes cp (< 0x800) as UTF-8; returns the byte count. */
static size_t tok_bpe_put_cp(char *out, unsigned cp)
{
    if (cp < 0x80) {
        out[0] = (char)cp;
        return 1;
    }
    out[0] = (char)(0xC0 | (cp >> 6));
    out[1] = (char)(0x80 | (cp & 0x3F));
    return 2;
}

static void tok_bpe_init_bytes(struct tok *t)
{
    for (size_t i = 0; i < sizeof(t->cp_byte) / sizeof(t->cp_byte[0]); i++)
        t->cp_byte[i] = -1;
    for (unsigned b = 0; b < 256; b++) {
        char s[2];
        uint16_t cp = tok_bpe_byte_cp((uint8_t)b);
        t->byte_cp[b] = cp;
        t->cp_byte[cp] = (int16_t)b;
        t->byte_tok[b] = tok_lookup(t, s, tok_bpe_put_cp(s, cp));
    }
}

/* -------------------------------------------------- pre-tokenizers */

/* The split patterns of the Hugging Face tokenizers these models ship with,
 * as llama.cpp applies them.  Where several are listed, each one re-splits
 * every piece the previous one produced. */
#define TOK_RE_GPT2 "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)"
#define TOK_RE_LLAMA3_HEAD                                                                         \
    "(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|"
#define TOK_RE_LLAMA3_TAIL "| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"
/* Llama 3 takes digits in threes, Qwen2 one at a time. */
#define TOK_RE_LLAMA3 TOK_RE_LLAMA3_HEAD "\\p{N}{1,3}" TOK_RE_LLAMA3_TAIL
#define TOK_RE_QWEN2  TOK_RE_LLAMA3_HEAD "\\p{N}" TOK_RE_LLAMA3_TAIL

struct tok_pre_def {
    const char *names; /* '|'-separated tokenizer.ggml.pre values */
    const char *re[TOK_MAX_RE];
    int ignore_merges; /* a word that is already a token skips the merges */
    int add_bos;       /* default when the file has no add_bos_token */
};

static const struct tok_pre_def tok_pre_defs[] = {
    {"gpt-2|phi-2|mpt|olmo", {TOK_RE_GPT2}, 0, 0},
    {"llama3|llama-v3|llama-bpe|falcon3|pixtral", {TOK_RE_LLAMA3}, 1, 1},
    {"dbrx|smaug-bpe", {TOK_RE_LLAMA3}, 0, 0},
    {"qwen2|deepseek-r1-qwen|stablelm2|megrez", {TOK_RE_QWEN2}, 0, 0},
    /* StarCoder's family (SmolLM included) isolates every digit first. */
    {"smollm|starcoder|refact|command-r|codeshell|exaone|minerva-7b",
     {"\\p{N}", TOK_RE_GPT2},
     0,
     0},
    {"default", {"[\\p{P}\\$\\+<=>\\^~\\|]+", TOK_RE_GPT2, "\\p{N}+", "[0-9][0-9][0-9]"}, 0, 0},
};

/* An unknown name gets GPT-2's own pattern: every byte-level BPE vocabulary
 * still encodes any text correctly with it (merges decide the tokens, the
 * split only limits where merges may cross), so such a model works, merely
 * with token boundaries that may differ from its reference tokenizer.  No
 * warning is printed: the library has no logging channel, and the choice is
 * stable and documented here. */
static const struct tok_pre_def tok_pre_fallback = {"", {TOK_RE_GPT2}, 0, 0};

static int tok_pre_name_in(const char *names, const char *name)
{
    size_t n = strlen(name);
    for (const char *p = names; *p;) {
        const char *bar = strchr(p, '|');
        size_t len = bar ? (size_t)(bar - p) : strlen(p);
        if (len == n && memcmp(p, name, n) == 0)
            return 1;
        p += len + (bar != NULL);
    }
    return 0;
}

static const struct tok_pre_def *tok_pre_find(const char *name)
{
    if (!name || !*name)
        name = "default"; /* what llama.cpp assumes when the key is missing */
    for (size_t i = 0; i < sizeof(tok_pre_defs) / sizeof(tok_pre_defs[0]); i++)
        if (tok_pre_name_in(tok_pre_defs[i].names, name))
            return &tok_pre_defs[i];
    return &tok_pre_fallback;
}

static int tok_bpe_compile(struct tok *t, const struct tok_pre_def *d, char *err, size_t errlen)
{
    for (int i = 0; i < TOK_MAX_RE && d->re[i]; i++) {
        int code;
        PCRE2_SIZE at;
        /* MATCH_INVALID_UTF: raw bytes that are not UTF-8 simply match no
         * class and end up as pieces of their own, which byte-level BPE can
         * still encode. */
        t->re[i] = pcre2_compile((PCRE2_SPTR)d->re[i], PCRE2_ZERO_TERMINATED,
                                 PCRE2_UTF | PCRE2_UCP | PCRE2_MATCH_INVALID_UTF, &code, &at, NULL);
        if (!t->re[i]) {
            PCRE2_UCHAR msg[120];
            pcre2_get_error_message(code, msg, sizeof(msg));
            return tok_fail(err, errlen, "tokenizer: pre-split regex: %s", (char *)msg);
        }
        t->n_re = i + 1;
        pcre2_jit_compile(t->re[i], PCRE2_JIT_COMPLETE); /* the interpreter is the fallback */
    }
    return 0;
}

/* ----------------------------------------------------------- merges */

static uint32_t tok_merge_hash(uint64_t key)
{
    key ^= key >> 30;
    key *= 0xbf58476d1ce4e5b9ull;
    key ^= key >> 27;
    key *= 0x94d049bb133111ebull;
    key ^= key >> 31;
    return (uint32_t)key;
}

static uint64_t tok_merge_key(int32_t left, int32_t right)
{
    return ((uint64_t)(uint32_t)left << 32 | (uint32_t)right) + 1;
}

static const struct tok_merge *tok_merge_find(const struct tok *t, int32_t left, int32_t right)
{
    if (!t->mhash)
        return NULL;
    uint64_t key = tok_merge_key(left, right);
    for (uint32_t i = tok_merge_hash(key) & t->mmask;; i = (i + 1) & t->mmask) {
        if (t->mhash[i].key == key)
            return &t->mhash[i];
        if (!t->mhash[i].key)
            return NULL;
    }
}

/* First rank wins for a repeated pair, as in the reference. */
static void tok_merge_insert(struct tok *t, int32_t left, int32_t right, int32_t rank,
                             int32_t result)
{
    uint64_t key = tok_merge_key(left, right);
    uint32_t i = tok_merge_hash(key) & t->mmask;
    while (t->mhash[i].key && t->mhash[i].key != key)
        i = (i + 1) & t->mmask;
    if (!t->mhash[i].key)
        t->mhash[i] = (struct tok_merge){key, rank, result};
}

/* A merge "a b" joins tokens a and b into token ab.  The split is at the
 * first space after the first byte, so a merge of " " itself still parses.
 * A merge naming text that is not a token can never apply in a vocabulary
 * where every byte is a token, and is dropped. */
static int tok_bpe_merges(struct tok *t, const struct tok_spec *sp)
{
    uint32_t size = 16;
    while (size < (uint32_t)sp->n_merges + (uint32_t)sp->n_merges / 2 + 1)
        size <<= 1;
    t->mhash = calloc(size, sizeof(*t->mhash));
    if (!t->mhash)
        return -1;
    t->mmask = size - 1;
    char *joined = NULL;
    size_t cap = 0;
    for (int r = 0; r < sp->n_merges; r++) {
        const char *m = sp->merges[r];
        size_t n = !m ? 0 : sp->merge_lens ? sp->merge_lens[r] : strlen(m);
        const char *sp_at = n > 1 ? memchr(m + 1, ' ', n - 1) : NULL;
        if (!sp_at)
            continue;
        size_t ln = (size_t)(sp_at - m), rn = n - ln - 1;
        if (tok_scratch_reserve((void **)&joined, &cap, ln + rn + 1, 1)) {
            free(joined);
            return -1;
        }
        memcpy(joined, m, ln);
        memcpy(joined + ln, sp_at + 1, rn);
        int32_t a = tok_lookup(t, m, ln), b = tok_lookup(t, sp_at + 1, rn);
        int32_t ab = tok_lookup(t, joined, ln + rn);
        if (a >= 0 && b >= 0 && ab >= 0)
            tok_merge_insert(t, a, b, r, ab);
    }
    free(joined);
    return 0;
}

int tok_bpe_init(struct tok *t, const struct tok_spec *sp, char *err, size_t errlen)
{
    const struct tok_pre_def *d = tok_pre_find(sp->pre);
    t->ignore_merges = d->ignore_merges;
    if (sp->add_bos < 0)
        t->add_bos = d->add_bos;
    tok_bpe_init_bytes(t);
    if (sp->n_merges < 0 || (sp->n_merges > 0 && !sp->merges))
        return tok_fail(err, errlen, "tokenizer: bad merges");
    if (tok_bpe_merges(t, sp))
        return tok_fail(err, errlen, "tokenizer: out of memory");
    return tok_bpe_compile(t, d, err, errlen);
}

void tok_bpe_free(struct tok *t)
{
    for (int i = 0; i < t->n_re; i++)
        pcre2_code_free(t->re[i]);
    t->n_re = 0;
}

/* ------------------------------------------------------ splitting */

struct tok_span {
    size_t start, len;
};

struct tok_spans {
    struct tok_span *v;
    size_t n, cap;
};

static int tok_spans_push(struct tok_spans *a, size_t start, size_t len)
{
    if (tok_scratch_reserve((void **)&a->v, &a->cap, a->n + 1, sizeof(*a->v)))
        return -1;
    a->v[a->n++] = (struct tok_span){start, len};
    return 0;
}

/* Splits one piece by re: every match is a piece, and so is every stretch
 * between matches (text no alternative matches, e.g. a lone "\n" before a
 * letter), so no byte is lost. */
static int tok_split_piece(const pcre2_code *re, pcre2_match_data *md, const char *text,
                           struct tok_span in, struct tok_spans *out)
{
    PCRE2_SPTR subj = (PCRE2_SPTR)(text + in.start);
    size_t pos = 0, done = 0;
    while (pos < in.len) {
        int rc = pcre2_match(re, subj, in.len, pos, 0, md, NULL);
        if (rc == PCRE2_ERROR_NOMATCH)
            break;
        if (rc < 0)
            return -1;
        const PCRE2_SIZE *ov = pcre2_get_ovector_pointer(md);
        if (ov[1] <= ov[0]) { /* an empty match: step over one character */
            pos = ov[0] + tok_utf8_len(subj[ov[0] < in.len ? ov[0] : 0]);
            continue;
        }
        if (ov[0] > done && tok_spans_push(out, in.start + done, ov[0] - done))
            return -1;
        if (tok_spans_push(out, in.start + ov[0], ov[1] - ov[0]))
            return -1;
        done = pos = ov[1];
    }
    if (done < in.len && tok_spans_push(out, in.start + done, in.len - done))
        return -1;
    return 0;
}

static int tok_bpe_split(const struct tok *t, pcre2_match_data *md, const char *text, size_t len,
                         struct tok_spans *cur)
{
    struct tok_spans next = {0};
    cur->n = 0;
    if (tok_spans_push(cur, 0, len))
        return -1;
    for (int r = 0; r < t->n_re; r++) {
        next.n = 0;
        for (size_t i = 0; i < cur->n; i++)
            if (tok_split_piece(t->re[r], md, text, cur->v[i], &next)) {
                free(next.v);
                return -1;
            }
        struct tok_spans tmp = *cur;
        *cur = next;
        next = tmp;
    }
    free(next.v);
    return 0;
}

/* ---------------------------------------------------------- merging */

struct tok_bpe_sym {
    int32_t id; /* token id; -1: a byte with no token; -2: merged away */
    int32_t prev, next;
};

struct tok_bpe_pair {
    int32_t rank, left;
    int32_t left_id, right_id; /* what the pair was; stale once either changed */
    int32_t result;
};

static int tok_pair_less(const void *pa, const void *pb)
{
    const struct tok_bpe_pair *a = pa, *b = pb;
    return a->rank != b->rank ? a->rank < b->rank : a->left < b->left;
}

static void tok_bpe_try(const struct tok *t, const struct tok_bpe_sym *sym, struct tok_heap *h,
                        int32_t left)
{
    if (left < 0 || sym[left].next < 0)
        return;
    int32_t a = sym[left].id, b = sym[sym[left].next].id;
    if (a < 0 || b < 0)
        return;
    const struct tok_merge *m = tok_merge_find(t, a, b);
    if (m)
        tok_heap_push(h, &(struct tok_bpe_pair){m->rank, left, a, b, m->result});
}

/* Merges one word's symbols in place.  Each merge adds at most two pairs,
 * so the heap never holds more than 3n entries. */
static void tok_bpe_merge(const struct tok *t, struct tok_bpe_sym *sym, int32_t n,
                          struct tok_heap *h)
{
    h->n = 0;
    for (int32_t i = 0; i + 1 < n; i++)
        tok_bpe_try(t, sym, h, i);
    while (h->n) {
        struct tok_bpe_pair p;
        tok_heap_pop(h, &p);
        struct tok_bpe_sym *l = &sym[p.left];
        if (l->id != p.left_id || l->next < 0 || sym[l->next].id != p.right_id)
            continue;
        struct tok_bpe_sym *r = &sym[l->next];
        l->id = p.result;
        l->next = r->next;
        if (r->next >= 0)
            sym[r->next].prev = p.left;
        r->id = -2;
        tok_bpe_try(t, sym, h, l->prev);
        tok_bpe_try(t, sym, h, p.left);
    }
}

/* The word's text as the vocabulary spells it (bytes -> stand-in chars). */
static int32_t tok_bpe_whole(const struct tok *t, struct tok_scratch *s, const char *w, size_t n)
{
    if (tok_scratch_reserve((void **)&s->buf, &s->buf_cap, 2 * n, 1))
        return -1;
    size_t m = 0;
    for (size_t i = 0; i < n; i++)
        m += tok_bpe_put_cp(s->buf + m, t->byte_cp[(uint8_t)w[i]]);
    return tok_lookup(t, s->buf, m);
}

static int tok_bpe_word(const struct tok *t, struct tok_scratch *s, const char *w, size_t n,
                        struct tok_ids *out)
{
    if (t->ignore_merges) {
        int32_t id = tok_bpe_whole(t, s, w, n);
        if (id >= 0)
            return tok_ids_push(out, id);
    }
    if (n > INT32_MAX / 4 ||
        tok_scratch_reserve(&s->sym, &s->sym_cap, n, sizeof(struct tok_bpe_sym)) ||
        tok_scratch_reserve(&s->heap, &s->heap_cap, 3 * n, sizeof(struct tok_bpe_pair)))
        return -1;
    struct tok_bpe_sym *sym = s->sym;
    for (size_t i = 0; i < n; i++)
        sym[i] = (struct tok_bpe_sym){t->byte_tok[(uint8_t)w[i]], (int32_t)i - 1,
                                      i + 1 < n ? (int32_t)i + 1 : -1};
    struct tok_heap h = {s->heap, 0, sizeof(struct tok_bpe_pair), tok_pair_less};
    tok_bpe_merge(t, sym, (int32_t)n, &h);
    for (int32_t i = 0; i >= 0; i = sym[i].next) {
        int32_t id = sym[i].id >= 0 ? sym[i].id : t->unk; /* a byte the vocab lacks */
        if (id >= 0 && tok_ids_push(out, id))
            return -1;
    }
    return 0;
}

int tok_bpe_encode(const struct tok *t, struct tok_scratch *s, const char *text, size_t len,
                   struct tok_ids *out)
{
    if (!len)
        return 0;
    if (!s->md && !(s->md = pcre2_match_data_create(1, NULL)))
        return -1;
    struct tok_spans words = {0};
    int rc = tok_bpe_split(t, s->md, text, len, &words);
    for (size_t i = 0; !rc && i < words.n; i++)
        rc = tok_bpe_word(t, s, text + words.v[i].start, words.v[i].len, out);
    free(words.v);
    return rc;
}
