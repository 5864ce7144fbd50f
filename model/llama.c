/*
 * model/llama.c — the Llama-family model: configuration and weights from a
 * GGUF file, and the forward pass over a flat batch.
 *
 * The forward pass reads top to bottom like the architecture: embed, then
 * per layer RMSNorm -> Q/K/V -> RoPE -> write K/V into the paged pool ->
 * attention -> output projection + residual, RMSNorm -> SwiGLU MLP +
 * residual; finally the last norm and the output head for the rows whose
 * logits are wanted.  Every step is one backend operation, so the same code
 * drives the CPU and the CUDA backends.
 *
 * Weights are dequantised on the host one tensor at a time and handed to the
 * backend, which keeps them in its own format.
 */
#include "model/model.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct layer_weights {
    struct be_buf *attn_norm, *wq, *wk, *wv, *wo;
    struct be_buf *ffn_norm, *w_gate, *w_up, *w_down;
};

/* Activations for one batch, grown to the largest batch seen. */
struct scratch {
    int cap_tokens, cap_out;
    struct be_buf *x, *h, *q, *k, *v, *att, *gate, *up;
    struct be_buf *out_x, *logits;
};

struct model {
    struct model_config cfg;
    struct be *be;
    struct tok *tok;
    struct tmpl *tmpl;
    struct be_buf *tok_embd, *out_norm, *output; /* output == tok_embd when tied */
    struct be_buf *inv_freq;
    struct layer_weights *layers;
    struct scratch s;
};

/* Architectures whose tensors and hyper-parameters follow the llama layout. */
static const char *const supported_archs[] = {"llama", "mistral", NULL};

static int arch_supported(const char *arch)
{
    for (int i = 0; supported_archs[i]; i++)
        if (strcmp(arch, supported_archs[i]) == 0)
            return 1;
    return 0;
}

/* Reads "<arch>.<suffix>" as u32; -1 when absent and required. */
static int cfg_u32(const struct gguf_file *f, const char *arch, const char *suffix, int *out,
                   int required, char *err, size_t errlen)
{
    char key[128];
    uint32_t v;
    snprintf(key, sizeof(key), "%s.%s", arch, suffix);
    if (gguf_get_u32(f, key, &v) == 0) {
        if (v > (1u << 30)) {
            snprintf(err, errlen, "model: %s = %u is out of range", key, v);
            return -1;
        }
        *out = (int)v;
        return 0;
    }
    if (required) {
        snprintf(err, errlen, "model: missing or non-integer metadata key %s", key);
        return -1;
    }
    return 0;
}

static int cfg_f32(const struct gguf_file *f, const char *arch, const char *suffix, float *out)
{
    char key[128];
    snprintf(key, sizeof(key), "%s.%s", arch, suffix);
    return gguf_get_f32(f, key, out);
}

static int config_rope_scaling(const struct gguf_file *f, struct model_config *c, char *err,
                               size_t errlen)
{
    char key[128];
    snprintf(key, sizeof(key), "%s.rope.scaling.type", c->arch);
    char *type = gguf_get_strdup(f, key);
    c->rope_scaling = ROPE_SCALING_NONE;
    c->rope_factor = 1.0f;
    if (!type)
        return 0;
    int rc = 0;
    if (strcmp(type, "linear") == 0) {
        c->rope_scaling = ROPE_SCALING_LINEAR;
        if (cfg_f32(f, c->arch, "rope.scaling.factor", &c->rope_factor) != 0 ||
            !(c->rope_factor > 0)) {
            snprintf(err, errlen, "model: linear rope scaling without a positive factor");
            rc = -1;
        }
    } else if (strcmp(type, "none") != 0) {
        snprintf(err, errlen, "model: unsupported rope scaling type '%s'", type);
        rc = -1;
    }
    free(type);
    return rc;
}

static int config_load(const struct gguf_file *f, struct model_config *c, char *err, size_t errlen)
{
    memset(c, 0, sizeof(*c));
    char *arch = gguf_get_strdup(f, "general.architecture");
    if (!arch) {
        snprintf(err, errlen, "model: general.architecture is missing");
        return -1;
    }
    if (!arch_supported(arch) || strlen(arch) >= sizeof(c->arch)) {
        snprintf(err, errlen, "model: unsupported architecture '%.64s'", arch);
        free(arch);
        return -1;
    }
    strcpy(c->arch, arch);
    free(arch);

    if (cfg_u32(f, c->arch, "block_count", &c->n_layers, 1, err, errlen) ||
        cfg_u32(f, c->arch, "embedding_length", &c->n_embd, 1, err, errlen) ||
        cfg_u32(f, c->arch, "attention.head_count", &c->n_heads, 1, err, errlen) ||
        cfg_u32(f, c->arch, "feed_forward_length", &c->n_ff, 1, err, errlen) ||
        cfg_u32(f, c->arch, "context_length", &c->n_ctx_train, 0, err, errlen))
        return -1;
    c->n_kv_heads = c->n_heads;
    if (cfg_u32(f, c->arch, "attention.head_count_kv", &c->n_kv_heads, 0, err, errlen))
        return -1;
    if (c->n_layers < 1 || c->n_embd < 1 || c->n_heads < 1 || c->n_kv_heads < 1 || c->n_ff < 1 ||
        c->n_heads % c->n_kv_heads != 0 || c->n_embd % c->n_heads != 0) {
        snprintf(err, errlen,
                 "model: inconsistent hyper-parameters (layers %d, embd %d, heads %d/%d)",
                 c->n_layers, c->n_embd, c->n_heads, c->n_kv_heads);
        return -1;
    }
    c->head_dim = c->n_embd / c->n_heads;
    if (cfg_u32(f, c->arch, "attention.key_length", &c->head_dim, 0, err, errlen))
        return -1;
    int n_rot = c->head_dim;
    if (cfg_u32(f, c->arch, "rope.dimension_count", &n_rot, 0, err, errlen))
        return -1;
    if (n_rot != c->head_dim || c->head_dim % 2 != 0) {
        snprintf(err, errlen, "model: partial rotary embedding (%d of %d dims) is not supported",
                 n_rot, c->head_dim);
        return -1;
    }
    c->rms_eps = 1e-5f;
    cfg_f32(f, c->arch, "attention.layer_norm_rms_epsilon", &c->rms_eps);
    c->rope_base = 10000.0f;
    cfg_f32(f, c->arch, "rope.freq_base", &c->rope_base);
    c->rope_neox = 0;
    return config_rope_scaling(f, c, err, errlen);
}

/* Looks a tensor up and checks its shape: ne0 (inner) × ne1 (rows). */
static const struct gguf_tensor *tensor_get(const struct gguf_file *f, const char *name,
                                            uint64_t ne0, uint64_t ne1, int required, char *err,
                                            size_t errlen)
{
    const struct gguf_tensor *t = gguf_tensor(f, name);
    if (!t) {
        if (required)
            snprintf(err, errlen, "model: tensor %s is missing", name);
        return NULL;
    }
    uint64_t rows = t->n_dims > 1 ? t->ne[1] : 1;
    if (t->ne[0] != ne0 || rows != ne1 || (t->n_dims > 2 && t->ne[2] * t->ne[3] != 1)) {
        snprintf(err, errlen, "model: tensor %s has shape [%llu, %llu], expected [%llu, %llu]",
                 name, (unsigned long long)t->ne[0], (unsigned long long)rows,
                 (unsigned long long)ne0, (unsigned long long)ne1);
        return NULL;
    }
    return t;
}

/* Dequantises one tensor and hands it to the backend as a [ne1 × ne0] weight. */
static struct be_buf *weight_load(struct model *m, const struct gguf_file *f, const char *name,
                                  uint64_t ne0, uint64_t ne1, char *err, size_t errlen)
{
    const struct gguf_tensor *t = tensor_get(f, name, ne0, ne1, 1, err, errlen);
    if (!t)
        return NULL;
    float *tmp = malloc(sizeof(float) * t->n_elems);
    if (!tmp) {
        snprintf(err, errlen, "model: out of memory loading %s", name);
        return NULL;
    }
    struct be_buf *w = NULL;
    if (dq_dequant(t->type, t->data, tmp, t->n_elems) != 0)
        snprintf(err, errlen, "model: tensor %s has unsupported weight type %s (%u)", name,
                 dq_type_name(t->type) ? dq_type_name(t->type) : "unknown", t->type);
    else if (!(w = m->be->ops->weight(m->be, tmp, ne1, ne0)))
        snprintf(err, errlen, "model: backend: %s", be_error(m->be));
    free(tmp);
    return w;
}

static int layer_load(struct model *m, const struct gguf_file *f, int l, char *err, size_t errlen)
{
    const struct model_config *c = &m->cfg;
    struct layer_weights *w = &m->layers[l];
    int64_t q_dim = (int64_t)c->n_heads * c->head_dim,
            kv_dim = (int64_t)c->n_kv_heads * c->head_dim;
    struct {
        struct be_buf **dst;
        const char *name;
        uint64_t ne0, ne1;
    } tab[] = {
        {&w->attn_norm, "attn_norm", c->n_embd, 1},   {&w->wq, "attn_q", c->n_embd, q_dim},
        {&w->wk, "attn_k", c->n_embd, kv_dim},        {&w->wv, "attn_v", c->n_embd, kv_dim},
        {&w->wo, "attn_output", q_dim, c->n_embd},    {&w->ffn_norm, "ffn_norm", c->n_embd, 1},
        {&w->w_gate, "ffn_gate", c->n_embd, c->n_ff}, {&w->w_up, "ffn_up", c->n_embd, c->n_ff},
        {&w->w_down, "ffn_down", c->n_ff, c->n_embd},
    };
    for (size_t i = 0; i < sizeof(tab) / sizeof(tab[0]); i++) {
        char name[96];
        snprintf(name, sizeof(name), "blk.%d.%s.weight", l, tab[i].name);
        *tab[i].dst = weight_load(m, f, name, tab[i].ne0, tab[i].ne1, err, errlen);
        if (!*tab[i].dst)
            return -1;
    }
    return 0;
}

/* Inverse frequencies of the rotary embedding, with the model's scaling. */
static int rope_load(struct model *m, const struct gguf_file *f, char *err, size_t errlen)
{
    const struct model_config *c = &m->cfg;
    int half = c->head_dim / 2;
    float inv[1024];
    if (half > 1024) {
        snprintf(err, errlen, "model: head_dim %d too large", c->head_dim);
        return -1;
    }
    /* Llama 3.1-style scaling ships per-frequency divisors as a tensor. */
    const struct gguf_tensor *ff = tensor_get(f, "rope_freqs.weight", half, 1, 0, err, errlen);
    if (!ff && gguf_tensor(f, "rope_freqs.weight"))
        return -1;
    if (ff && ff->type != DQ_F32) {
        snprintf(err, errlen, "model: rope_freqs.weight must be F32");
        return -1;
    }
    for (int i = 0; i < half; i++) {
        double freq = pow((double)c->rope_base, -2.0 * i / c->head_dim);
        if (c->rope_scaling == ROPE_SCALING_LINEAR)
            freq /= c->rope_factor;
        if (ff) {
            float div;
            memcpy(&div, (const char *)ff->data + 4 * (size_t)i, 4);
            freq /= div;
        }
        inv[i] = (float)freq;
    }
    if (ff)
        m->cfg.rope_scaling = ROPE_SCALING_LLAMA3;
    m->inv_freq = m->be->ops->alloc(m->be, sizeof(float) * half);
    if (!m->inv_freq || m->be->ops->upload(m->be, m->inv_freq, 0, inv, sizeof(float) * half)) {
        snprintf(err, errlen, "model: backend: %s", be_error(m->be));
        return -1;
    }
    return 0;
}

static int weights_load(struct model *m, const struct gguf_file *f, char *err, size_t errlen)
{
    struct model_config *c = &m->cfg;
    const struct gguf_tensor *emb = gguf_tensor(f, "token_embd.weight");
    if (!emb || emb->n_dims != 2) {
        snprintf(err, errlen, "model: tensor token_embd.weight is missing or not 2-D");
        return -1;
    }
    if (emb->ne[1] < 1 || emb->ne[1] > (1u << 24)) {
        snprintf(err, errlen, "model: vocabulary size %llu out of range",
                 (unsigned long long)emb->ne[1]);
        return -1;
    }
    c->n_vocab = (int)emb->ne[1];
    if (c->n_vocab < tok_vocab_size(m->tok)) {
        snprintf(err, errlen, "model: token_embd has %d rows but the vocabulary has %d tokens",
                 c->n_vocab, tok_vocab_size(m->tok));
        return -1;
    }
    m->layers = calloc((size_t)c->n_layers, sizeof(*m->layers));
    if (!m->layers) {
        snprintf(err, errlen, "model: out of memory");
        return -1;
    }
    if (!(m->tok_embd =
              weight_load(m, f, "token_embd.weight", c->n_embd, c->n_vocab, err, errlen)) ||
        !(m->out_norm = weight_load(m, f, "output_norm.weight", c->n_embd, 1, err, errlen)))
        return -1;
    c->tied_output = gguf_tensor(f, "output.weight") == NULL;
    if (c->tied_output)
        m->output = m->tok_embd;
    else if (!(m->output = weight_load(m, f, "output.weight", c->n_embd, c->n_vocab, err, errlen)))
        return -1;
    for (int l = 0; l < c->n_layers; l++)
        if (layer_load(m, f, l, err, errlen))
            return -1;
    return rope_load(m, f, err, errlen);
}

static int frontend_load(struct model *m, const struct gguf_file *f, const struct model_opts *opts,
                         char *err, size_t errlen)
{
    if (tok_load(f, &m->tok, err, errlen))
        return -1;
    char *src = gguf_get_strdup(f, "tokenizer.chat_template");
    const char *name = opts ? opts->template_name : NULL;
    int rc = 0;
    if (src || name)
        rc = tmpl_load(src, name, m->tok, &m->tmpl, err, errlen);
    free(src);
    return rc;
}

int model_load(const char *path, const struct model_opts *opts, struct be *be, struct model **out,
               char *err, size_t errlen)
{
    struct gguf_file *f = NULL;
    *out = NULL;
    if (gguf_open(path, &f, err, errlen))
        return -1;
    struct model *m = calloc(1, sizeof(*m));
    int rc = -1;
    if (!m) {
        snprintf(err, errlen, "model: out of memory");
    } else {
        m->be = be;
        if (config_load(f, &m->cfg, err, errlen) == 0 &&
            frontend_load(m, f, opts, err, errlen) == 0 && weights_load(m, f, err, errlen) == 0)
            rc = 0;
    }
    gguf_close(f);
    if (rc) {
        model_free(m);
        return -1;
    }
    *out = m;
    return 0;
}

static void scratch_free(struct model *m)
{
    struct scratch *s = &m->s;
    struct be_buf **all[] = {&s->x,   &s->h,    &s->q,  &s->k,     &s->v,
                             &s->att, &s->gate, &s->up, &s->out_x, &s->logits};
    for (size_t i = 0; i < sizeof(all) / sizeof(all[0]); i++) {
        m->be->ops->free(m->be, *all[i]);
        *all[i] = NULL;
    }
    s->cap_tokens = s->cap_out = 0;
}

void model_free(struct model *m)
{
    if (!m)
        return;
    if (m->be) {
        scratch_free(m);
        struct be_ops const *o = m->be->ops;
        for (int l = 0; m->layers && l < m->cfg.n_layers; l++) {
            struct layer_weights *w = &m->layers[l];
            struct be_buf *bufs[] = {w->attn_norm, w->wq,     w->wk,   w->wv,    w->wo,
                                     w->ffn_norm,  w->w_gate, w->w_up, w->w_down};
            for (size_t i = 0; i < sizeof(bufs) / sizeof(bufs[0]); i++)
                o->free(m->be, bufs[i]);
        }
        if (m->output != m->tok_embd)
            o->free(m->be, m->output);
        o->free(m->be, m->tok_embd);
        o->free(m->be, m->out_norm);
        o->free(m->be, m->inv_freq);
    }
    free(m->layers);
    tmpl_free(m->tmpl);
    tok_free(m->tok);
    free(m);
}

const struct model_config *model_config(const struct model *m)
{
    return &m->cfg;
}
const struct tok *model_tok(const struct model *m)
{
    return m->tok;
}
const struct tmpl *model_tmpl(const struct model *m)
{
    return m->tmpl;
}
struct be *model_backend(const struct model *m)
{
    return m->be;
}

struct be_kv_geom model_kv_geom(const struct model *m, int block_size)
{
    struct be_kv_geom g = {m->cfg.n_layers, m->cfg.n_kv_heads, m->cfg.head_dim, block_size};
    return g;
}

/* Makes the activation buffers hold n_tokens rows and n_out output rows. */
static int scratch_reserve(struct model *m, int n_tokens, int n_out)
{
    struct scratch *s = &m->s;
    if (n_tokens <= s->cap_tokens && n_out <= s->cap_out)
        return 0;
    const struct model_config *c = &m->cfg;
    int nt = n_tokens > s->cap_tokens ? n_tokens : s->cap_tokens;
    int no = n_out > s->cap_out ? n_out : s->cap_out;
    scratch_free(m);
    size_t f = sizeof(float), q_dim = (size_t)c->n_heads * c->head_dim;
    size_t kv_dim = (size_t)c->n_kv_heads * c->head_dim;
    size_t h_dim = (size_t)c->n_embd > q_dim ? (size_t)c->n_embd : q_dim;
    struct {
        struct be_buf **dst;
        size_t bytes;
    } tab[] = {
        {&s->x, f * nt * c->n_embd},     {&s->h, f * nt * h_dim},
        {&s->q, f * nt * q_dim},         {&s->k, f * nt * kv_dim},
        {&s->v, f * nt * kv_dim},        {&s->att, f * nt * q_dim},
        {&s->gate, f * nt * c->n_ff},    {&s->up, f * nt * c->n_ff},
        {&s->out_x, f * no * c->n_embd}, {&s->logits, f * no * c->n_vocab},
    };
    for (size_t i = 0; i < sizeof(tab) / sizeof(tab[0]); i++)
        if (!(*tab[i].dst = m->be->ops->alloc(m->be, tab[i].bytes))) {
            scratch_free(m);
            return -1;
        }
    s->cap_tokens = nt;
    s->cap_out = no;
    return 0;
}

/* Checks what the backend cannot: token ids against the vocabulary. */
static int batch_check(const struct model *m, const struct be_batch *bt, char *err, size_t errlen)
{
    if (bt->n_tokens < 1 || bt->n_out < 0 || bt->n_out > bt->n_tokens) {
        snprintf(err, errlen, "model: bad batch (%d tokens, %d outputs)", bt->n_tokens, bt->n_out);
        return -1;
    }
    for (int i = 0; i < bt->n_tokens; i++)
        if (bt->tokens[i] < 0 || bt->tokens[i] >= m->cfg.n_vocab) {
            snprintf(err, errlen, "model: token id %d out of range [0, %d)", bt->tokens[i],
                     m->cfg.n_vocab);
            return -1;
        }
    return 0;
}

/* One transformer layer on the batch's hidden state s->x. */
static int layer_forward(struct model *m, int l, struct be_buf *kv, const struct be_kv_geom *g,
                         int n)
{
    const struct model_config *c = &m->cfg;
    const struct be_ops *o = m->be->ops;
    struct be *b = m->be;
    struct scratch *s = &m->s;
    struct layer_weights *w = &m->layers[l];
    int q_dim = c->n_heads * c->head_dim, kv_dim = c->n_kv_heads * c->head_dim;
    float scale = 1.0f / sqrtf((float)c->head_dim);

    /* Attention block: pre-norm, projections, rotary positions, paged KV. */
    if (o->rmsnorm(b, s->x, w->attn_norm, s->h, n, c->n_embd, c->rms_eps) ||
        o->matmul(b, s->h, w->wq, s->q, n, q_dim, c->n_embd) ||
        o->matmul(b, s->h, w->wk, s->k, n, kv_dim, c->n_embd) ||
        o->matmul(b, s->h, w->wv, s->v, n, kv_dim, c->n_embd) ||
        o->rope(b, s->q, c->n_heads, c->head_dim, m->inv_freq, c->rope_neox) ||
        o->rope(b, s->k, c->n_kv_heads, c->head_dim, m->inv_freq, c->rope_neox) ||
        o->kv_write(b, kv, g, l, s->k, s->v) ||
        o->attention(b, s->q, kv, g, l, c->n_heads, scale, s->att) ||
        o->matmul(b, s->att, w->wo, s->h, n, c->n_embd, q_dim) ||
        o->add(b, s->x, s->h, (size_t)n * c->n_embd))
        return -1;
    /* MLP block: pre-norm, SwiGLU, down projection, residual. */
    if (o->rmsnorm(b, s->x, w->ffn_norm, s->h, n, c->n_embd, c->rms_eps) ||
        o->matmul(b, s->h, w->w_gate, s->gate, n, c->n_ff, c->n_embd) ||
        o->matmul(b, s->h, w->w_up, s->up, n, c->n_ff, c->n_embd) ||
        o->swiglu(b, s->gate, s->up, s->gate, (size_t)n * c->n_ff) ||
        o->matmul(b, s->gate, w->w_down, s->h, n, c->n_embd, c->n_ff) ||
        o->add(b, s->x, s->h, (size_t)n * c->n_embd))
        return -1;
    return 0;
}

int model_forward(struct model *m, struct be_buf *kv, const struct be_kv_geom *g,
                  const struct be_batch *bt, float *logits, char *err, size_t errlen)
{
    return model_forward_until(m, kv, g, bt, logits, NULL, NULL, err, errlen);
}

int model_forward_until(struct model *m, struct be_buf *kv, const struct be_kv_geom *g,
                        const struct be_batch *bt, float *logits, int (*stop)(void *), void *arg,
                        char *err, size_t errlen)
{
    const struct model_config *c = &m->cfg;
    const struct be_ops *o = m->be->ops;
    struct be *b = m->be;
    struct scratch *s = &m->s;
    if (batch_check(m, bt, err, errlen))
        return -1;
    if (g->n_layers != c->n_layers || g->n_kv_heads != c->n_kv_heads ||
        g->head_dim != c->head_dim) {
        snprintf(err, errlen, "model: KV pool geometry does not match the model");
        return -1;
    }
    int n = bt->n_tokens;
    if (scratch_reserve(m, n, bt->n_out) || o->batch(b, bt) ||
        o->embed(b, m->tok_embd, s->x, c->n_embd))
        goto fail;
    for (int l = 0; l < c->n_layers; l++) {
        if (l > 0 && stop && stop(arg))
            return 1;
        if (layer_forward(m, l, kv, g, n))
            goto fail;
    }
    if (bt->n_out == 0) {
        if (o->sync(b))
            goto fail;
        return 0;
    }
    if (o->gather_rows(b, s->x, s->out_x, c->n_embd) ||
        o->rmsnorm(b, s->out_x, m->out_norm, s->out_x, bt->n_out, c->n_embd, c->rms_eps) ||
        o->matmul(b, s->out_x, m->output, s->logits, bt->n_out, c->n_vocab, c->n_embd) ||
        o->download(b, logits, s->logits, 0, sizeof(float) * bt->n_out * c->n_vocab))
        goto fail;
    return 0;
fail:
    snprintf(err, errlen, "model: backend: %s", be_error(b));
    return -1;
}
