/*
 * model/tok_vocab.c — builds a struct tok from plain arrays and answers the
 * simple questions about its vocabulary (size, special ids, token text).
 *
 * The vocabulary is one string arena plus an open-addressed hash from text
 * to id.  Which tokens are special, which end generation and which get cut
 * out of raw text before BPE runs is decided here, once, so that encoding and
 * decoding only read.
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "model/tok_internal.h"

int tok_fail(char *err, size_t errlen, const char *fmt, ...)
{
    if (err && errlen) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(err, errlen, fmt, ap);
        va_end(ap);
    }
    return -1;
}

/* FNV-1a: token texts are short, so a simple byte hash is enough. */
static uint64_t tok_hash(const char *s, size_t n)
{
    uint64_t h = 1469598103934665603ull;
    for (size_t i = 0; i < n; i++) {
        h ^= (uint8_t)s[i];
        h *= 1099511628211ull;
    }
    return h;
}

int32_t tok_lookup(const struct tok *t, const char *s, size_t n)
{
    uint32_t i = (uint32_t)tok_hash(s, n) & t->vmask;
    for (;; i = (i + 1) & t->vmask) {
        uint32_t slot = t->vhash[i];
        if (!slot)
            return -1;
        uint32_t id = slot - 1;
        if (t->len[id] == n && memcmp(t->strs + t->off[id], s, n) == 0)
            return (int32_t)id;
    }
}

/* Smallest power of two holding n entries at a load factor below 2/3. */
static uint32_t tok_table_size(size_t n)
{
    uint32_t size = 16;
    while (size < n + n / 2 + 1)
        size <<= 1;
    return size;
}

/* Inserts every non-empty text; a later duplicate wins, as in llama.cpp. */
static int tok_build_hash(struct tok *t)
{
    uint32_t size = tok_table_size((size_t)t->n_vocab);
    t->vhash = calloc(size, sizeof(*t->vhash));
    if (!t->vhash)
        return -1;
    t->vmask = size - 1;
    for (int id = 0; id < t->n_vocab; id++) {
        const char *s = t->strs + t->off[id];
        size_t n = t->len[id];
        if (n == 0)
            continue;
        uint32_t i = (uint32_t)tok_hash(s, n) & t->vmask;
        while (t->vhash[i]) {
            uint32_t other = t->vhash[i] - 1;
            if (t->len[other] == n && memcmp(t->strs + t->off[other], s, n) == 0)
                break;
            i = (i + 1) & t->vmask;
        }
        t->vhash[i] = (uint32_t)id + 1;
    }
    return 0;
}

static int tok_copy_texts(struct tok *t, const struct tok_spec *sp, char *err, size_t errlen)
{
    size_t total = 0;
    t->off = malloc(sizeof(*t->off) * (size_t)t->n_vocab);
    t->len = malloc(sizeof(*t->len) * (size_t)t->n_vocab);
    if (!t->off || !t->len)
        return tok_fail(err, errlen, "tokenizer: out of memory");
    for (int i = 0; i < t->n_vocab; i++) {
        if (!sp->texts[i])
            return tok_fail(err, errlen, "tokenizer: token %d has no text", i);
        size_t n = sp->lens ? sp->lens[i] : strlen(sp->texts[i]);
        if (n > UINT32_MAX / 4 || total + n + 1 > UINT32_MAX)
            return tok_fail(err, errlen, "tokenizer: token texts too large");
        t->off[i] = (uint32_t)total;
        t->len[i] = (uint32_t)n;
        total += n + 1;
    }
    t->strs = malloc(total ? total : 1);
    if (!t->strs)
        return tok_fail(err, errlen, "tokenizer: out of memory");
    for (int i = 0; i < t->n_vocab; i++) {
        memcpy(t->strs + t->off[i], sp->texts[i], t->len[i]);
        t->strs[t->off[i] + t->len[i]] = '\0';
    }
    return 0;
}

static uint8_t tok_attr_of_type(int32_t type)
{
    switch (type) {
    case TOK_TYPE_NORMAL:
        return TOKF_NORMAL;
    case TOK_TYPE_UNKNOWN:
        return TOKF_UNKNOWN;
    case TOK_TYPE_CONTROL:
        return TOKF_CONTROL;
    case TOK_TYPE_USER:
        return TOKF_USER;
    case TOK_TYPE_BYTE:
        return TOKF_BYTE;
    default:
        return 0; /* unused or undefined: never produced, decodes to nothing */
    }
}

/* Texts that end a turn in the model families llama.cpp knows.  Converters
 * do not always record them as eos/eot, or even as control tokens (Qwen2's
 * vocabulary has "</s>" as a normal token), so, like llama.cpp, we recognise
 * them by text and make them control tokens: they end generation, are cut
 * out of text parsed for specials, and decode to nothing.  Doing exactly what
 * llama.cpp does keeps our ids identical to its ids. */
static const char *const tok_eog_texts[] = {
    "<|eot_id|>",
    "<|im_end|>",
    "<|end|>",
    "<|return|>",
    "<|call|>",
    "<|flush|>",
    "<|calls|>",
    "<end_of_turn>",
    "<|endoftext|>",
    "</s>",
    "<|eom_id|>",
    "<EOT>",
    "_<EOT>",
    "[EOT]",
    "[EOS]",
    "<|end_of_text|>",
    "<end_of_utterance>",
    "<eos>",
    "<turn|>",
    "<|tool_response>",
    "<\xef\xbd\x9c"
    "end\xe2\x96\x81of\xe2\x96\x81sentence\xef\xbd\x9c>", /* DeepSeek */
    "[e~[",
};

static void tok_mark_eog(struct tok *t)
{
    for (size_t i = 0; i < sizeof(tok_eog_texts) / sizeof(tok_eog_texts[0]); i++) {
        int32_t id = tok_lookup(t, tok_eog_texts[i], strlen(tok_eog_texts[i]));
        if (id >= 0)
            t->attr[id] |= TOKF_EOG | TOKF_CONTROL;
    }
    const int32_t ids[] = {t->eos, t->eot, t->eom};
    for (size_t i = 0; i < 3; i++)
        if (ids[i] >= 0)
            t->attr[ids[i]] |= TOKF_EOG;
}

struct tok_len_id {
    uint32_t len;
    int32_t id;
};

static int tok_cmp_len_desc(const void *a, const void *b)
{
    const struct tok_len_id *x = a, *y = b;
    if (x->len != y->len)
        return x->len > y->len ? -1 : 1;
    return x->id < y->id ? -1 : x->id > y->id;
}

/* Control, user-defined and unknown tokens are cut out of raw text before
 * BPE (user-defined always, the others only when parsing specials).  Longer
 * texts go first so that "<|im_end|>" is never read as a shorter token. */
static int tok_collect_special(struct tok *t)
{
    int n = 0;
    for (int i = 0; i < t->n_vocab; i++)
        if ((t->attr[i] & (TOKF_CONTROL | TOKF_USER | TOKF_UNKNOWN)) && t->len[i] > 0)
            n++;
    struct tok_len_id *tmp = malloc(sizeof(*tmp) * (size_t)(n ? n : 1));
    t->special = malloc(sizeof(*t->special) * (size_t)(n ? n : 1));
    if (!tmp || !t->special) {
        free(tmp);
        return -1;
    }
    n = 0;
    for (int i = 0; i < t->n_vocab; i++)
        if ((t->attr[i] & (TOKF_CONTROL | TOKF_USER | TOKF_UNKNOWN)) && t->len[i] > 0)
            tmp[n++] = (struct tok_len_id){t->len[i], i};
    qsort(tmp, (size_t)n, sizeof(*tmp), tok_cmp_len_desc);
    for (int i = 0; i < n; i++)
        t->special[i] = tmp[i].id;
    t->n_special = n;
    free(tmp);
    return 0;
}

static int32_t tok_check_id(const struct tok *t, int32_t id)
{
    return id >= 0 && id < t->n_vocab ? id : -1;
}

static void tok_set_flags(struct tok *t, const struct tok_spec *sp)
{
    t->bos = tok_check_id(t, sp->bos);
    t->eos = tok_check_id(t, sp->eos);
    t->eot = tok_check_id(t, sp->eot);
    t->eom = tok_check_id(t, sp->eom);
    t->unk = tok_check_id(t, sp->unk);
    t->pad = tok_check_id(t, sp->pad);
    int spm = sp->kind == TOK_KIND_SPM;
    /* BPE's default for add_bos comes from the pre-tokenizer (tok_bpe_init). */
    if (sp->add_bos >= 0 || spm)
        t->add_bos = sp->add_bos >= 0 ? sp->add_bos != 0 : 1;
    t->add_eos = sp->add_eos > 0;
    /* Only SentencePiece prefixes a space; llama.cpp ignores the key for BPE. */
    t->add_space_prefix = spm && sp->add_space_prefix != 0;
}

static int tok_build_core(struct tok *t, const struct tok_spec *sp, char *err, size_t errlen)
{
    t->kind = sp->kind;
    t->n_vocab = sp->n_vocab;
    if (tok_copy_texts(t, sp, err, errlen))
        return -1;
    t->scores = malloc(sizeof(*t->scores) * (size_t)t->n_vocab);
    t->attr = malloc((size_t)t->n_vocab);
    if (!t->scores || !t->attr || tok_build_hash(t))
        return tok_fail(err, errlen, "tokenizer: out of memory");
    for (int i = 0; i < t->n_vocab; i++) {
        t->scores[i] = sp->scores ? sp->scores[i] : 0.0f;
        t->attr[i] = sp->types ? tok_attr_of_type(sp->types[i]) : TOKF_NORMAL;
    }
    tok_set_flags(t, sp);
    tok_mark_eog(t);
    if (tok_collect_special(t))
        return tok_fail(err, errlen, "tokenizer: out of memory");
    return 0;
}

int tok_build(const struct tok_spec *sp, struct tok **out, char *err, size_t errlen)
{
    *out = NULL;
    if (!sp || sp->n_vocab <= 0 || sp->n_vocab >= INT32_MAX / 2 || !sp->texts)
        return tok_fail(err, errlen, "tokenizer: empty vocabulary");
    if (sp->kind != TOK_KIND_BPE && sp->kind != TOK_KIND_SPM)
        return tok_fail(err, errlen, "tokenizer: unknown kind");
    struct tok *t = calloc(1, sizeof(*t));
    if (!t)
        return tok_fail(err, errlen, "tokenizer: out of memory");
    int rc = tok_build_core(t, sp, err, errlen);
    if (!rc)
        rc = sp->kind == TOK_KIND_BPE ? tok_bpe_init(t, sp, err, errlen)
                                      : tok_spm_init(t, err, errlen);
    if (!rc)
        rc = tok_pieces_init(t, err, errlen);
    if (rc) {
        tok_free(t);
        return -1;
    }
    *out = t;
    return 0;
}

void tok_free(struct tok *t)
{
    if (!t)
        return;
    tok_bpe_free(t);
    free(t->strs);
    free(t->off);
    free(t->len);
    free(t->scores);
    free(t->attr);
    free(t->vhash);
    free(t->mhash);
    free(t->dec);
    free(t->dec_off);
    free(t->dec_len);
    free(t->special);
    free(t);
}

int tok_vocab_size(const struct tok *t)
{
    return t ? t->n_vocab : 0;
}

int32_t tok_bos(const struct tok *t)
{
    return t ? t->bos : -1;
}

int32_t tok_eos(const struct tok *t)
{
    return t ? t->eos : -1;
}

int tok_add_bos(const struct tok *t)
{
    return t && t->add_bos && t->bos >= 0;
}

int tok_is_eog(const struct tok *t, int32_t id)
{
    return t && id >= 0 && id < t->n_vocab && (t->attr[id] & TOKF_EOG) != 0;
}

int tok_is_control(const struct tok *t, int32_t id)
{
    return t && id >= 0 && id < t->n_vocab && (t->attr[id] & TOKF_CONTROL) != 0;
}

const char *tok_text(const struct tok *t, int32_t id)
{
    if (!t || id < 0 || id >= t->n_vocab)
        return NULL;
    return t->strs + t->off[id];
}

int32_t tok_find(const struct tok *t, const char *text)
{
    if (!t || !text)
        return -1;
    return tok_lookup(t, text, strlen(text));
}
