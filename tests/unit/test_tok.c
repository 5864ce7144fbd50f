/*
 * tests/unit/test_tok.c — the tokenizer's rules: byte-level BPE and
 * SentencePiece pinned on tiny hand-built vocabularies, where every expected
 * id can be worked out by hand; special tokens and UTF-8 streams likewise.
 * The real vocabularies are tested against llama.cpp in test_tok_ref.c.
 */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "model/model.h"
#include "model/tok_internal.h"
#include "tests/unit/test_tok_util.h"

/* ------------------------------------------------------------ helpers */

/* The GPT-2 spelling of n raw bytes, as byte-level vocabularies store it. */
static char *map_bytes_n(const char *raw, size_t n)
{
    size_t m = 0;
    char *s = malloc(2 * n + 1);
    for (size_t i = 0; i < n; i++) {
        unsigned cp = tok_bpe_byte_cp((uint8_t)raw[i]);
        if (cp < 0x80) {
            s[m++] = (char)cp;
        } else {
            s[m++] = (char)(0xC0 | (cp >> 6));
            s[m++] = (char)(0x80 | (cp & 0x3F));
        }
    }
    s[m] = '\0';
    return s;
}

static char *map_bytes(const char *raw)
{
    return map_bytes_n(raw, strlen(raw));
}

/* A byte-level vocabulary under construction: ids 0..255 are the bytes. */
struct tb {
    char *texts[512];
    int32_t types[512];
    int n;
    char *merges[64];
    int n_merges;
};

static void tb_init(struct tb *b)
{
    memset(b, 0, sizeof(*b));
    for (int i = 0; i < 256; i++) {
        char raw = (char)i;
        b->texts[i] = map_bytes_n(&raw, 1);
        b->types[i] = TOK_TYPE_NORMAL;
    }
    b->n = 256;
}

/* Adds a token stored verbatim (specials) and returns its id. */
static int32_t tb_add(struct tb *b, const char *text, int32_t type)
{
    b->texts[b->n] = strdup(text);
    b->types[b->n] = type;
    return b->n++;
}

/* Adds the merge of raw byte strings l and r, and their joint token. */
static void tb_merge(struct tb *b, const char *l, const char *r)
{
    char *ml = map_bytes(l), *mr = map_bytes(r);
    char *m = malloc(strlen(ml) + strlen(mr) + 2);
    sprintf(m, "%s %s", ml, mr);
    b->merges[b->n_merges++] = m;
    char raw[64];
    snprintf(raw, sizeof(raw), "%s%s", l, r);
    char *joined = map_bytes(raw);
    int have = 0;
    for (int i = 0; i < b->n; i++)
        have |= strcmp(b->texts[i], joined) == 0;
    if (!have)
        tb_add(b, joined, TOK_TYPE_NORMAL);
    free(joined);
    free(ml);
    free(mr);
}

static struct tok *tb_build(struct tb *b, const char *pre, int add_bos, int32_t bos, int32_t eos)
{
    struct tok_spec sp = {
        .kind = TOK_KIND_BPE,
        .pre = pre,
        .n_vocab = b->n,
        .texts = (const char *const *)b->texts,
        .types = b->types,
        .n_merges = b->n_merges,
        .merges = (const char *const *)b->merges,
        .bos = bos,
        .eos = eos,
        .eot = -1,
        .eom = -1,
        .unk = -1,
        .pad = -1,
        .add_bos = add_bos,
        .add_eos = -1,
        .add_space_prefix = -1,
    };
    struct tok *t = NULL;
    char err[200] = "";
    ck_assert_msg(tok_build(&sp, &t, err, sizeof(err)) == 0, "tok_build: %s", err);
    for (int i = 0; i < b->n; i++)
        free(b->texts[i]);
    for (int i = 0; i < b->n_merges; i++)
        free(b->merges[i]);
    return t;
}

/* The id of the token spelling raw bytes (byte-level vocabularies). */
static int32_t bid(const struct tok *t, const char *raw)
{
    char *m = map_bytes(raw);
    int32_t id = tok_find(t, m);
    free(m);
    ck_assert_msg(id >= 0, "no token for '%s'", raw);
    return id;
}

/* Decodes ids one at a time through a stream and returns what came out
 * after each push (in outs[i]) and the whole text. */
static char *stream_all(const struct tok *t, const int32_t *ids, int n, size_t *lens)
{
    struct tok_stream s = {0};
    size_t cap = tok_max_piece(t), used = 0;
    char *all = malloc((size_t)(n + 1) * cap + 1);
    for (int i = 0; i < n; i++) {
        size_t k = tok_stream_push(t, &s, ids[i], all + used, cap);
        if (lens)
            lens[i] = k;
        used += k;
    }
    used += tok_stream_flush(t, &s, all + used, cap);
    all[used] = '\0';
    return all;
}

/* ----------------------------------------------- byte-level BPE rules */

START_TEST(bpe_merges_apply_lowest_rank_first)
{
    /* "abc" with "b c" ranked before "a b" must come out a|bc, and with
     * the ranks swapped ab|c: only the order of the merge list differs. */
    struct tb b;
    tb_init(&b);
    tb_merge(&b, "b", "c");
    tb_merge(&b, "a", "b");
    struct tok *t = tb_build(&b, "gpt-2", -1, -1, -1);
    EXPECT_IDS(t, "abc", 0, bid(t, "a"), bid(t, "bc"));
    tok_free(t);

    tb_init(&b);
    tb_merge(&b, "a", "b");
    tb_merge(&b, "b", "c");
    t = tb_build(&b, "gpt-2", -1, -1, -1);
    EXPECT_IDS(t, "abc", 0, bid(t, "ab"), bid(t, "c"));
    tok_free(t);
}
END_TEST

START_TEST(bpe_merges_chain_into_longer_tokens)
{
    struct tb b;
    tb_init(&b);
    tb_merge(&b, "l", "l");
    tb_merge(&b, "h", "e");
    tb_merge(&b, "he", "ll");
    tb_merge(&b, "hell", "o");
    tb_merge(&b, " ", "w");
    struct tok *t = tb_build(&b, "gpt-2", -1, -1, -1);
    EXPECT_IDS(t, "hello", 0, bid(t, "hello"));
    EXPECT_IDS(t, "hello world", 0, bid(t, "hello"), bid(t, " w"), bid(t, "o"), bid(t, "r"),
               bid(t, "l"), bid(t, "d"));
    /* Equal pairs merge left to right: "lll" is ll|l, not l|ll. */
    EXPECT_IDS(t, "lll", 0, bid(t, "ll"), bid(t, "l"));
    tok_free(t);
}
END_TEST

START_TEST(bpe_pre_split_keeps_merges_inside_words)
{
    /* "b" + " " would merge if words were not split first. */
    struct tb b;
    tb_init(&b);
    tb_merge(&b, "b", " ");
    tb_merge(&b, "a", "b");
    struct tok *t = tb_build(&b, "gpt-2", -1, -1, -1);
    EXPECT_IDS(t, "ab ab", 0, bid(t, "ab"), bid(t, " "), bid(t, "ab"));
    tok_free(t);
}
END_TEST

START_TEST(bpe_pre_tokenizer_is_chosen_by_name)
{
    /* "3 4" merges first if the split lets it: GPT-2 keeps the digit run
     * together (12|34), Llama 3 cuts it in threes (123|4), SmolLM isolates
     * every digit.  An unknown name behaves as GPT-2. */
    const char *pres[] = {"gpt-2", "llama-bpe", "smollm", "no-such-pre"};
    for (int k = 0; k < 4; k++) {
        struct tb b;
        tb_init(&b);
        tb_merge(&b, "3", "4");
        tb_merge(&b, "1", "2");
        tb_merge(&b, "12", "3");
        struct tok *t = tb_build(&b, pres[k], 0, -1, -1);
        if (k == 1)
            EXPECT_IDS(t, "1234", 0, bid(t, "123"), bid(t, "4"));
        else if (k == 2)
            EXPECT_IDS(t, "1234", 0, '1', '2', '3', '4');
        else
            EXPECT_IDS(t, "1234", 0, bid(t, "12"), bid(t, "34"));
        tok_free(t);
    }
}
END_TEST

START_TEST(bpe_gpt2_and_llama3_split_whitespace_differently)
{
    struct tb b;
    tb_init(&b);
    tb_merge(&b, " ", " ");
    tb_merge(&b, "\n", "\n");
    struct tok *t = tb_build(&b, "gpt-2", -1, -1, -1);
    /* \s+(?!\S) leaves the last space to the word... */
    EXPECT_IDS(t, "a   b", 0, 'a', bid(t, "  "), ' ', 'b');
    /* ...and a newline before a letter stands alone. */
    EXPECT_IDS(t, "a.\n\nb", 0, 'a', '.', '\n', '\n', 'b');
    tok_free(t);
    tb_init(&b);
    tb_merge(&b, " ", " ");
    tb_merge(&b, "\n", "\n");
    t = tb_build(&b, "llama3", -1, -1, -1);
    /* Llama 3 keeps the newlines after punctuation together. */
    EXPECT_IDS(t, "a.\n\nb", 0, 'a', '.', bid(t, "\n\n"), 'b');
    tok_free(t);
}
END_TEST

START_TEST(bpe_llama3_takes_whole_words_that_are_tokens)
{
    /* ignore_merges: a word spelled by one token is that token even when
     * no merge chain leads there. */
    struct tb b;
    tb_init(&b);
    char *xyz = map_bytes("xyz");
    tb_add(&b, xyz, TOK_TYPE_NORMAL);
    free(xyz);
    struct tok *t = tb_build(&b, "llama-bpe", -1, -1, -1);
    EXPECT_IDS(t, "xyz", 0, bid(t, "xyz"));
    tok_free(t);
    tb_init(&b);
    xyz = map_bytes("xyz");
    tb_add(&b, xyz, TOK_TYPE_NORMAL);
    free(xyz);
    t = tb_build(&b, "gpt-2", -1, -1, -1);
    EXPECT_IDS(t, "xyz", 0, bid(t, "x"), bid(t, "y"), bid(t, "z"));
    tok_free(t);
}
END_TEST

START_TEST(bpe_every_byte_round_trips)
{
    struct tb b;
    tb_init(&b);
    struct tok *t = tb_build(&b, "gpt-2", -1, -1, -1);
    char text[256];
    for (int i = 0; i < 255; i++)
        text[i] = (char)(i + 1);
    text[255] = '\0';
    int32_t *ids = NULL;
    int n = tok_encode(t, text, 255, 0, &ids);
    ck_assert_int_eq(n, 255);
    for (int i = 0; i < n; i++)
        ck_assert_int_eq(ids[i], i + 1); /* byte b is token b */
    /* Decoding the bytes one by one gives the text back, except that the
     * invalid UTF-8 in it (0x80-0xFF alone) becomes U+FFFD. */
    char *s = tok_decode(t, ids, (size_t)n);
    ck_assert_mem_eq(s, text, 127);
    ck_assert_mem_eq(s + 127, "\xEF\xBF\xBD", 3);
    free(s);
    free(ids);
    tok_free(t);
}
END_TEST

START_TEST(bpe_raw_invalid_utf8_is_still_encoded)
{
    struct tb b;
    tb_init(&b);
    tb_merge(&b, "a", "b");
    struct tok *t = tb_build(&b, "llama3", -1, -1, -1);
    EXPECT_IDS(t,
               "ab\xFF\xC3"
               "ab",
               0, bid(t, "ab"), 0xFF, 0xC3, bid(t, "ab"));
    tok_free(t);
}
END_TEST

/* ------------------------------------------------------ special tokens */

static struct tok *special_vocab(int add_bos)
{
    struct tb b;
    tb_init(&b);
    tb_merge(&b, "h", "i");
    tb_add(&b, "<|bos|>", TOK_TYPE_CONTROL);         /* 257 */
    tb_add(&b, "<|end|>", TOK_TYPE_CONTROL);         /* 258 */
    tb_add(&b, "<|end|><|more|>", TOK_TYPE_CONTROL); /* 259 */
    tb_add(&b, "[U]", TOK_TYPE_USER);                /* 260 */
    return tb_build(&b, "gpt-2", add_bos, 257, 258);
}

START_TEST(special_tokens_parse_only_when_asked)
{
    struct tok *t = special_vocab(0);
    ck_assert_str_eq(tok_text(t, 258), "<|end|>");
    EXPECT_IDS(t, "hi<|end|>hi", TOK_PARSE_SPECIAL, bid(t, "hi"), 258, bid(t, "hi"));
    /* Without parsing, the control token's text is ordinary text. */
    EXPECT_IDS(t, "<|end|>", 0, '<', '|', 'e', 'n', 'd', '|', '>');
    tok_free(t);
}
END_TEST

START_TEST(special_tokens_longest_text_wins)
{
    struct tok *t = special_vocab(0);
    EXPECT_IDS(t, "<|end|><|more|><|end|>", TOK_PARSE_SPECIAL, 259, 258);
    tok_free(t);
}
END_TEST

START_TEST(special_user_defined_tokens_always_split)
{
    /* As in Hugging Face and llama.cpp: added (user-defined) tokens are
     * matched whatever the flag says. */
    struct tok *t = special_vocab(0);
    EXPECT_IDS(t, "hi[U]hi", 0, bid(t, "hi"), 260, bid(t, "hi"));
    EXPECT_IDS(t, "hi[U]hi", TOK_PARSE_SPECIAL, bid(t, "hi"), 260, bid(t, "hi"));
    tok_free(t);
}
END_TEST

START_TEST(special_bos_needs_flag_and_vocab)
{
    struct tok *t = special_vocab(1);
    ck_assert_int_eq(tok_add_bos(t), 1);
    EXPECT_IDS(t, "hi", TOK_ADD_BOS, 257, bid(t, "hi"));
    EXPECT_IDS(t, "hi", 0, bid(t, "hi"));
    int32_t *ids = NULL;
    ck_assert_int_eq(tok_encode(t, "", 0, TOK_ADD_BOS, &ids), 1);
    ck_assert_int_eq(ids[0], 257);
    free(ids);
    tok_free(t);
    t = special_vocab(0);
    ck_assert_int_eq(tok_add_bos(t), 0);
    EXPECT_IDS(t, "hi", TOK_ADD_BOS, bid(t, "hi"));
    ck_assert_int_eq(tok_encode(t, "", 0, TOK_ADD_BOS, &ids), 0);
    ck_assert_ptr_nonnull(ids);
    free(ids);
    tok_free(t);
}
END_TEST

START_TEST(special_eog_and_control_flags)
{
    struct tok *t = special_vocab(0);
    ck_assert_int_eq(tok_eos(t), 258);
    ck_assert_int_eq(tok_bos(t), 257);
    ck_assert(tok_is_eog(t, 258));  /* eos */
    ck_assert(!tok_is_eog(t, 257)); /* bos */
    ck_assert(!tok_is_eog(t, 'h'));
    ck_assert(tok_is_control(t, 257));
    ck_assert(!tok_is_control(t, 260)); /* user-defined tokens are text */
    ck_assert(!tok_is_eog(t, -1));
    ck_assert(!tok_is_eog(t, tok_vocab_size(t)));
    ck_assert_ptr_null(tok_text(t, tok_vocab_size(t)));
    ck_assert_int_eq(tok_find(t, "no such token"), -1);
    tok_free(t);

    /* A known end-of-turn text is EOG even when no id names it. */
    struct tb b;
    tb_init(&b);
    int32_t im_end = tb_add(&b, "<|im_end|>", TOK_TYPE_CONTROL);
    t = tb_build(&b, "gpt-2", -1, -1, -1);
    ck_assert(tok_is_eog(t, im_end));
    tok_free(t);
}
END_TEST

START_TEST(encode_rejects_bad_arguments)
{
    struct tok *t = special_vocab(0);
    int32_t *ids = (int32_t *)1;
    ck_assert_int_eq(tok_encode(t, NULL, 3, 0, &ids), -1);
    ck_assert_ptr_null(ids);
    ck_assert_int_eq(tok_encode(NULL, "x", 1, 0, &ids), -1);
    ck_assert_int_eq(tok_encode(t, "x", 1, 0, NULL), -1);
    tok_free(t);

    struct tok_spec sp = {.kind = TOK_KIND_BPE, .n_vocab = 0};
    char err[100] = "";
    ck_assert_int_eq(tok_build(&sp, &t, err, sizeof(err)), -1);
    ck_assert_ptr_null(t);
    ck_assert(strlen(err) > 0);
}
END_TEST

/* ------------------------------------------------- SentencePiece rules */

#define SPC "\xE2\x96\x81"

/* <unk> <s> </s>, the 256 byte tokens, then a few pieces. */
static struct tok *spm_vocab(float s_ab, float s_bc, int add_space_prefix)
{
    static const char *pieces[] = {SPC, "a", "b", "c", SPC "a", "ab", "bc", SPC "ab", "<x>"};
    const char *texts[3 + 256 + 9];
    char bytes[256][8];
    float scores[3 + 256 + 9] = {0};
    int32_t types[3 + 256 + 9];
    texts[0] = "<unk>", types[0] = TOK_TYPE_UNKNOWN;
    texts[1] = "<s>", types[1] = TOK_TYPE_CONTROL;
    texts[2] = "</s>", types[2] = TOK_TYPE_CONTROL;
    for (int i = 0; i < 256; i++) {
        snprintf(bytes[i], sizeof(bytes[i]), "<0x%02X>", i);
        texts[3 + i] = bytes[i];
        types[3 + i] = TOK_TYPE_BYTE;
    }
    const float sc[] = {-5, -6, -6, -6, -1, s_ab, s_bc, -0.1f, 0};
    for (int i = 0; i < 9; i++) {
        texts[259 + i] = pieces[i];
        scores[259 + i] = sc[i];
        types[259 + i] = i == 8 ? TOK_TYPE_USER : TOK_TYPE_NORMAL;
    }
    struct tok_spec sp = {
        .kind = TOK_KIND_SPM,
        .n_vocab = 268,
        .texts = texts,
        .scores = scores,
        .types = types,
        .bos = 1,
        .eos = 2,
        .eot = -1,
        .eom = -1,
        .unk = 0,
        .pad = -1,
        .add_bos = -1,
        .add_eos = -1,
        .add_space_prefix = add_space_prefix,
    };
    struct tok *t = NULL;
    char err[200] = "";
    ck_assert_msg(tok_build(&sp, &t, err, sizeof(err)) == 0, "tok_build: %s", err);
    return t;
}

static int32_t sid(const struct tok *t, const char *text)
{
    int32_t id = tok_find(t, text);
    ck_assert_msg(id >= 0, "no token '%s'", text);
    return id;
}

START_TEST(spm_merges_highest_score_first)
{
    /* bc outscores ab: _ a bc, then _a bc. */
    struct tok *t = spm_vocab(-2.0f, -0.5f, -1);
    EXPECT_IDS(t, "abc", 0, sid(t, SPC "a"), sid(t, "bc"));
    tok_free(t);
    /* ab outscores bc: _ ab c, then _ab c. */
    t = spm_vocab(-0.2f, -0.5f, -1);
    EXPECT_IDS(t, "abc", 0, sid(t, SPC "ab"), sid(t, "c"));
    tok_free(t);
}
END_TEST

START_TEST(spm_unknown_characters_fall_back_to_bytes)
{
    struct tok *t = spm_vocab(-2.0f, -0.5f, -1);
    EXPECT_IDS(t, "a\xC3\xA9", 0, sid(t, SPC "a"), sid(t, "<0xC3>"), sid(t, "<0xA9>"));
    EXPECT_IDS(t, "a b", 0, sid(t, SPC "a"), sid(t, SPC), sid(t, "b"));
    tok_free(t);
}
END_TEST

START_TEST(spm_space_prefix_and_bos_defaults)
{
    struct tok *t = spm_vocab(-2.0f, -0.5f, -1);
    ck_assert_int_eq(tok_add_bos(t), 1); /* SentencePiece's default */
    EXPECT_IDS(t, "a", TOK_ADD_BOS, 1, sid(t, SPC "a"));
    tok_free(t);
    t = spm_vocab(-2.0f, -0.5f, 0);
    EXPECT_IDS(t, "a", 0, sid(t, "a"));
    tok_free(t);
}
END_TEST

START_TEST(spm_special_tokens_restart_the_space_prefix)
{
    struct tok *t = spm_vocab(-2.0f, -0.5f, -1);
    EXPECT_IDS(t, "a</s>a", TOK_PARSE_SPECIAL, sid(t, SPC "a"), 2, sid(t, SPC "a"));
    /* A user-defined token is cut out too, and so restarts the prefix. */
    EXPECT_IDS(t, "a<x>a", 0, sid(t, SPC "a"), sid(t, "<x>"), sid(t, SPC "a"));
    /* Unparsed, "</s>" is spelled in bytes (no piece covers it). */
    EXPECT_IDS(t, "</s>", 0, sid(t, SPC), sid(t, "<0x3C>"), sid(t, "<0x2F>"), sid(t, "<0x73>"),
               sid(t, "<0x3E>"));
    tok_free(t);
}
END_TEST

START_TEST(spm_decode_drops_only_the_first_prefix_space)
{
    struct tok *t = spm_vocab(-2.0f, -0.5f, -1);
    int32_t ids[] = {sid(t, SPC "a"), sid(t, "bc"), sid(t, SPC "a")};
    char *s = tok_decode(t, ids, 3);
    ck_assert_str_eq(s, "abc a");
    free(s);
    /* As in llama.cpp, a BOS in front keeps the space. */
    int32_t with_bos[] = {1, sid(t, SPC "a")};
    s = tok_decode(t, with_bos, 2);
    ck_assert_str_eq(s, " a");
    free(s);
    /* A stream that continues earlier tokens keeps it as well. */
    struct tok_stream st = {.n_tokens = 5};
    char out[64];
    size_t n = tok_stream_push(t, &st, sid(t, SPC "a"), out, sizeof(out));
    ck_assert_uint_eq(n, 2);
    ck_assert_mem_eq(out, " a", 2);
    /* Byte tokens decode to their bytes, unk and control to nothing. */
    int32_t bytes[] = {0, sid(t, "<0xC3>"), 2, sid(t, "<0xA9>")};
    s = tok_decode(t, bytes, 4);
    ck_assert_str_eq(s, "\xC3\xA9");
    free(s);
    tok_free(t);
}
END_TEST

/* ------------------------------------------------------- UTF-8 streams */

/* A vocabulary whose tokens cut a 4-byte emoji (F0 9F 98 80) in two. */
static struct tok *emoji_vocab(void)
{
    struct tb b;
    tb_init(&b);
    tb_merge(&b, "a", "\xF0");
    tb_merge(&b, "a\xF0", "\x9F");
    tb_merge(&b, "\x98", "\x80");
    tb_merge(&b, "\x98\x80", "b");
    tb_add(&b, "<|c|>", TOK_TYPE_CONTROL);
    return tb_build(&b, "gpt-2", -1, -1, -1);
}

START_TEST(stream_holds_back_a_split_character)
{
    struct tok *t = emoji_vocab();
    int32_t ids[] = {bid(t, "a\xF0\x9F"), bid(t, "\x98\x80"
                                                 "b")};
    size_t lens[2];
    char *s = stream_all(t, ids, 2, lens);
    ck_assert_uint_eq(lens[0], 1); /* "a", the emoji's first half held */
    ck_assert_uint_eq(lens[1], 5); /* the whole emoji, then "b" */
    ck_assert_str_eq(s, "a\xF0\x9F\x98\x80"
                        "b");
    free(s);
    tok_free(t);
}
END_TEST

START_TEST(stream_emits_each_byte_of_a_split_emoji_once)
{
    struct tok *t = emoji_vocab();
    int32_t ids[] = {0xF0, 0x9F, 0x98, 0x80, 'x'};
    size_t lens[5];
    char *s = stream_all(t, ids, 5, lens);
    ck_assert_uint_eq(lens[0] + lens[1] + lens[2], 0);
    ck_assert_uint_eq(lens[3], 4);
    ck_assert_str_eq(s, "\xF0\x9F\x98\x80x");
    free(s);
    tok_free(t);
}
END_TEST

START_TEST(stream_replaces_invalid_bytes_without_waiting)
{
    struct tok *t = emoji_vocab();
    struct tok_stream st = {0};
    char out[64];
    /* A stray continuation byte is replaced at once. */
    ck_assert_uint_eq(tok_stream_push(t, &st, 0x80, out, sizeof(out)), 3);
    ck_assert_mem_eq(out, "\xEF\xBF\xBD", 3);
    /* A started sequence broken by ASCII: one U+FFFD, then the ASCII. */
    ck_assert_uint_eq(tok_stream_push(t, &st, 0xF0, out, sizeof(out)), 0);
    ck_assert_uint_eq(tok_stream_push(t, &st, 0x9F, out, sizeof(out)), 0);
    ck_assert_uint_eq(tok_stream_push(t, &st, 'x', out, sizeof(out)), 4);
    ck_assert_mem_eq(out,
                     "\xEF\xBF\xBD"
                     "x",
                     4);
    /* A surrogate (ED A0) can never complete: two replacements. */
    ck_assert_uint_eq(tok_stream_push(t, &st, 0xED, out, sizeof(out)), 0);
    ck_assert_uint_eq(tok_stream_push(t, &st, 0xA0, out, sizeof(out)), 6);
    ck_assert_int_eq(st.n_pending, 0);
    /* An incomplete sequence left at the end is flushed as one U+FFFD. */
    ck_assert_uint_eq(tok_stream_push(t, &st, 0xE2, out, sizeof(out)), 0);
    ck_assert_uint_eq(tok_stream_flush(t, &st, out, sizeof(out)), 3);
    ck_assert_uint_eq(tok_stream_flush(t, &st, out, sizeof(out)), 0);
    /* Control tokens decode to nothing and do not disturb what is held. */
    int32_t ctl = tok_find(t, "<|c|>");
    ck_assert_uint_eq(tok_stream_push(t, &st, 0xC3, out, sizeof(out)), 0);
    ck_assert_uint_eq(tok_stream_push(t, &st, ctl, out, sizeof(out)), 0);
    ck_assert_uint_eq(tok_stream_push(t, &st, 0xA9, out, sizeof(out)), 2);
    ck_assert_mem_eq(out, "\xC3\xA9", 2);
    ck_assert_int_eq(st.n_tokens, 10);
    tok_free(t);
}
END_TEST

START_TEST(stream_never_writes_past_cap)
{
    struct tok *t = emoji_vocab();
    struct tok_stream st = {0};
    char out[4] = {'#', '#', '#', '#'};
    int32_t id = bid(t, "\x98\x80"
                        "b"); /* U+FFFD twice and "b": 7 bytes */
    ck_assert_uint_eq(tok_stream_push(t, &st, id, out, 3), 3);
    ck_assert_int_eq(out[3], '#');
    ck_assert_uint_ge(tok_max_piece(t), 7);
    tok_free(t);
}
END_TEST

Suite *test_suite(void)
{
    Suite *s = suite_create("tok");
    TCase *bpe = tcase_create("bpe");
    tcase_add_test(bpe, bpe_merges_apply_lowest_rank_first);
    tcase_add_test(bpe, bpe_merges_chain_into_longer_tokens);
    tcase_add_test(bpe, bpe_pre_split_keeps_merges_inside_words);
    tcase_add_test(bpe, bpe_pre_tokenizer_is_chosen_by_name);
    tcase_add_test(bpe, bpe_gpt2_and_llama3_split_whitespace_differently);
    tcase_add_test(bpe, bpe_llama3_takes_whole_words_that_are_tokens);
    tcase_add_test(bpe, bpe_every_byte_round_trips);
    tcase_add_test(bpe, bpe_raw_invalid_utf8_is_still_encoded);
    suite_add_tcase(s, bpe);
    TCase *sp = tcase_create("special");
    tcase_add_test(sp, special_tokens_parse_only_when_asked);
    tcase_add_test(sp, special_tokens_longest_text_wins);
    tcase_add_test(sp, special_user_defined_tokens_always_split);
    tcase_add_test(sp, special_bos_needs_flag_and_vocab);
    tcase_add_test(sp, special_eog_and_control_flags);
    tcase_add_test(sp, encode_rejects_bad_arguments);
    suite_add_tcase(s, sp);
    TCase *spm = tcase_create("spm");
    tcase_add_test(spm, spm_merges_highest_score_first);
    tcase_add_test(spm, spm_unknown_characters_fall_back_to_bytes);
    tcase_add_test(spm, spm_space_prefix_and_bos_defaults);
    tcase_add_test(spm, spm_special_tokens_restart_the_space_prefix);
    tcase_add_test(spm, spm_decode_drops_only_the_first_prefix_space);
    suite_add_tcase(s, spm);
    TCase *st = tcase_create("stream");
    tcase_add_test(st, stream_holds_back_a_split_character);
    tcase_add_test(st, stream_emits_each_byte_of_a_split_emoji_once);
    tcase_add_test(st, stream_replaces_invalid_bytes_without_waiting);
    tcase_add_test(st, stream_never_writes_past_cap);
    suite_add_tcase(s, st);
    return s;
}
