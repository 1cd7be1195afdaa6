/* seedgen.c - writes seed inputs for the fuzz targets with the project's own code (called
 * by fuzz/make-corpus; not a fuzz target itself).
 *   seedgen DIR [GGUF...]
 * DIR/<target>/ receives: mini models (complete GGUFs of a few KB: llama, Llama 3 rope
 * factors, qwen2 biases; F32 F16 Q8_0 Q4_0) for gguf_model; vocabulary-only GGUFs cut
 * from make-model's tiny shapes and from each GGUF argument
 * (general.* and tokenizer.* keys, no tensors) plus small byte-level BPE vocabularies
 * (GPT-2 byte mapping, merges, control tokens; pre gpt2 / qwen2 / llama-bpe) for
 * gguf_tokenizer; tiny llama2.c checkpoints (v0 with
 * shared and separate classifier, v1 export) for llama2c; serialized automata for sam;
 * history stores with answers and a cached automaton (4 KiB pages, and compacted to 512-byte
 * pages, rollback journal and WAL) for history; a trace file for trace;
 * task rows for dataset; field-encoded requests for chat_template. */
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "draft/recycle.h"
#include "runtime/history.h"
#include "datasets/trace.h"
#include "modelfile/gguf.h"
#include "tools/make_model.h"
#include "modelfile/tensor_types.h"
#include "suffix_automaton/sam.h"

static char root[900];

/* root/target/name, creating root/target; p holds the path. */
static void seed_path(char *p, size_t cap, const char *target, const char *name) {
    snprintf(p, cap, "%s/%s", root, target);
    mkdir(p, 0755);
    snprintf(p, cap, "%s/%s/%s", root, target, name);
}

static void put(const char *target, const char *name, const void *a, size_t na, const void *b, size_t nb) {
    char p[1200];
    seed_path(p, sizeof p, target, name);
    FILE *f = fopen(p, "wb");
    if (!f || fwrite(a, 1, na, f) != na || (nb && fwrite(b, 1, nb, f) != nb) || fclose(f)) {
        fprintf(stderr, "seedgen: cannot write %s\n", p);
        exit(1);
    }
}

/* Write a GGUF seed with the project's writer, and free the writer. */
static void write_gguf(sdn_gguf_writer *w, const char *target, const char *name, sdn_gguf_fill_fn fill, void *ctx) {
    char p[1200];
    seed_path(p, sizeof p, target, name);
    sdn_err e = {0};
    if (sdn_gguf_writer_write(w, p, fill, ctx, &e)) { fprintf(stderr, "seedgen: %s\n", e.msg); exit(1); }
    sdn_gguf_writer_free(w);
}

static void vocab_only(const char *src, int k) {
    sdn_gguf *g;
    sdn_err e = {0};
    if (sdn_gguf_open(src, &g, &e)) { fprintf(stderr, "seedgen: %s\n", e.msg); exit(1); }
    sdn_gguf_writer *w = sdn_gguf_writer_new();
    for (int i = 0; i < sdn_gguf_n_kv(g); i++) {
        const char *key = sdn_gguf_kv_key(g, i);
        if (!strncmp(key, "tokenizer.", 10) || !strncmp(key, "general.", 8)) sdn_gguf_w_copy_kv(w, g, i);
    }
    char name[64];
    snprintf(name, sizeof name, "vocab-%d.gguf", k);
    write_gguf(w, "gguf_tokenizer", name, NULL, NULL);
    sdn_gguf_close(g);
}

/* A llama2.c checkpoint: dim 8, hidden 16, 1 layer, 2 heads, 2 kv heads, vocab 32, seq 4. */
static void llama2c(int version, int shared) {
    int32_t h[7] = {8, 16, 1, 2, 2, shared ? 32 : -32, 4};
    long dim = 8, hid = 16, L = 1, V = 32, kvd = 8, hs = 4;
    long n = V * dim + L * (2 * dim + 2 * dim * dim + 2 * kvd * dim + 3 * hid * dim) + dim + (version == 0 ? 4 * hs : 0) + (shared ? 0 : V * dim);
    float *w = malloc((size_t)n * 4);
    for (long i = 0; i < n; i++) w[i] = (float)((i * 37) % 19) / 19.0f - 0.5f;
    uint8_t head[260] = {0};
    size_t hn;
    if (version == 0) {
        memcpy(head + 1, h, 28);
        hn = 29;
    } else {
        uint32_t magic = 0x616b3432;
        int32_t ver = 1;
        memcpy(head + 1, &magic, 4);
        memcpy(head + 5, &ver, 4);
        h[5] = 32;
        memcpy(head + 9, h, 28);
        head[1 + 28 + 8] = (uint8_t)shared;
        hn = 257;
    }
    head[0] = 0; /* selector: checkpoint */
    char name[64];
    snprintf(name, sizeof name, "ckpt-v%d-%s.bin", version, shared ? "shared" : "cls");
    put("llama2c", name, head, hn, w, (size_t)n * 4);
    free(w);
}

static void sam_seed(int k) {
    sdn_sam *s;
    sdn_sam_create(&s, NULL);
    for (int q = 0; q < 1 + k; q++) {
        int32_t t[40];
        for (int i = 0; i < 40; i++) t[i] = (int32_t)((i * (q + 3)) % (5 + 4 * k));
        sdn_sam_add_seq(s, (uint32_t)q, t, 40, NULL);
    }
    if (k == 1) sdn_sam_shrink(s, NULL);
    uint8_t *b;
    size_t n;
    if (sdn_sam_serialize(s, &b, &n, NULL)) exit(1);
    char name[32];
    snprintf(name, sizeof name, "sam-%d.bin", k);
    put("sam", name, b, n, NULL, 0);
    free(b);
    sdn_sam_free(s);
}

/* The file at p as the seed history/name. */
static void put_file(const char *name, const char *p) {
    FILE *f = fopen(p, "rb");
    if (!f) exit(1);
    fseek(f, 0, SEEK_END);
    long sz = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *d = malloc((size_t)sz);
    if (fread(d, 1, (size_t)sz, f) != (size_t)sz) exit(1);
    fclose(f);
    put("history", name, d, (size_t)sz, NULL, 0);
    free(d);
}

static void history_seed(int k) {
    char p[1200], side[1300];
    snprintf(p, sizeof p, "%s/history-tmp-%d.db", root, k);
    unlink(p);
    sdn_history *h;
    sdn_err e = {0};
    if (sdn_history_open(p, &h, &e)) { fprintf(stderr, "seedgen: %s\n", e.msg); exit(1); }
    for (int i = 0; i < 3 + k; i++) {
        int32_t t[20];
        for (int j = 0; j < 20; j++) t[j] = (int32_t)((i * 7 + j * 3) % 50);
        char text[32];
        snprintf(text, sizeof text, "answer %d", i);
        sdn_history_add(h, i % 2 ? "other" : "g", "A", t, 20, k && i == 1 ? NULL : text, 1000 + i, NULL, NULL);
    }
    uint8_t *b;
    size_t n;
    if (k) sdn_history_automaton(h, "g", "A", SDN_HISTORY_GROUP, 500, &b, &n, NULL, NULL, NULL, NULL), free(b);
    /* a candidate table of model "A" (50 tokens, 4 candidates each) */
    sdn_recycle *r = NULL;
    if (sdn_recycle_new(50, 4, &r, &e)) { fprintf(stderr, "seedgen: %s\n", e.msg); exit(1); }
    for (int32_t t = 0; t < 50; t += 3) {
        int32_t c[4] = {(t + 1) % 50, (t + 7) % 50, (t * 3) % 50, 49 - t};
        sdn_recycle_update(r, &t, c, 4, 4 - t % 3, 1, NULL, NULL);
    }
    if (!sdn_recycle_serialize(r, &b, &n, &e)) sdn_history_candidates_put(h, "A", 50, 4, b, n, &e), free(b);
    sdn_recycle_free(r);
    sdn_history_close(h);
    char name[32];
    snprintf(name, sizeof name, "store-%d.db", k);
    put_file(name, p);
    /* The same store compacted to 512-byte pages (the smallest SQLite allows): 7 pages of
     * 4 KiB, mostly free space, become a few KiB where most mutated bytes land in a header,
     * a cell or a record. Rollback journal for store 0, WAL for store 1 (both kinds of file
     * the store opens). */
    sqlite3 *db = NULL;
    if (sqlite3_open(p, &db) != SQLITE_OK ||
        sqlite3_exec(db, "PRAGMA journal_mode=DELETE; PRAGMA page_size=512; VACUUM;", NULL, NULL, NULL) != SQLITE_OK ||
        (k && sqlite3_exec(db, "PRAGMA journal_mode=WAL", NULL, NULL, NULL) != SQLITE_OK)) {
        fprintf(stderr, "seedgen: compacting %s: %s\n", p, sqlite3_errmsg(db));
        exit(1);
    }
    sqlite3_close(db);
    snprintf(name, sizeof name, "store-%d-p512.db", k);
    put_file(name, p);
    unlink(p);
    snprintf(side, sizeof side, "%s-wal", p), unlink(side);
    snprintf(side, sizeof side, "%s-shm", p), unlink(side);
}

static void trace_seed(void) {
    char p[1200];
    seed_path(p, sizeof p, "trace", "rows.jsonl");
    FILE *f = fopen(p, "w");
    int32_t ctx[6] = {1, 5, 9, 5, 9, 7}, out[4] = {5, 9, 7, 2}, pt[10], pr[10];
    float pp[10];
    for (int i = 0; i < 10; i++) pt[i] = (int32_t)(i % 9), pp[i] = i % 2 ? 0.25f : 0.5f, pr[i] = 0;
    (void)pr;
    int32_t op[8] = {5, 1, 9, 8, 7, 0, 2, 3}; /* output predictions: each row starts with its output token */
    sdn_trace_row r = {.id = "r1", .task = "summary", .group = "g", .model = "m", .model_fp = "0123456789abcdef", .tokenizer = "tok",
                       .vocab_size = 32, .n_ctx = 6, .n_out = 4, .ctx = ctx, .out = out, .stop = SDN_STOP_EOG, .eog_token = 2,
                       .max_new = 16, .preds_k = 2, .pred_tok = pt, .pred_prob = pp, .out_pred_tok = op};
    sdn_trace_write(f, &r, NULL);
    sdn_trace_row r2 = {.id = "r2", .task = "rag", .n_ctx = 3, .n_out = 2, .ctx = ctx, .out = out, .stop = SDN_STOP_LENGTH, .eog_token = -1,
                        .source_json = "{\"from\":\"seed\",\"n\":[1,2]}"};
    sdn_trace_write(f, &r2, NULL);
    fclose(f);
}

static void text_seeds(void) {
    const char *ds = "{\"id\": \"1\", \"task\": \"summary\", \"group\": \"news\", \"context\": \"Doc text.\", \"prompt\": \"Summarize.\"}\n"
                     "{\"id\": \"2\", \"task\": \"rag\", \"context\": \"a\\\\nb\", \"prompt\": \"Q?\", \"reference\": \"A\"}\n";
    put("dataset", "tasks.jsonl", ds, strlen(ds), NULL, 0);
    const char *sb = "{\"question_id\": 81, \"category\": \"summarization\", \"turns\": [\"Summarize: text\"]}\n";
    put("dataset", "specbench.jsonl", sb, strlen(sb), NULL, 0);
    static const char ct0[] = "\x00" "{% for message in messages %}<|im_start|>{{ message['role'] }}\n{{ message['content'] }}<|im_end|>\n"
                              "{% endfor %}You are Qwen, created by Alibaba Cloud. You are a helpful assistant.\x00" "-\x00" "What happened?\x00" ""
                              "Document one.\x00" "Document two.";
    put("chat_template", "chatml.bin", ct0, sizeof ct0 - 1, NULL, 0);
    static const char ct1[] = "\x0a<|start_header_id|>system<|end_header_id|>Cutting Knowledge Date: {{ date }}<|eot_id|>\x00" ""
                              "Be brief.\x00" "Question?\x00" "Doc";
    put("chat_template", "llama3.bin", ct1, sizeof ct1 - 1, NULL, 0);
    static const char ct2[] = "\x03[INST] <<SYS>>\x00" "sys\x00" "user says\x00" "reply\x00" "again";
    put("chat_template", "llama2.bin", ct2, sizeof ct2 - 1, NULL, 0);
}

static void model_seed(const char *shape, const char *type, int k) {
    char p[1200], name[128];
    snprintf(name, sizeof name, "%s-%s.gguf", shape, type);
    seed_path(p, sizeof p, "gguf_model", name);
    sdn_make_model_opts o = {.shape = shape, .out_path = p, .type = type, .seed = 1, .n_layers = 1, .quiet = 1};
    sdn_err e = {0};
    if (sdn_make_model(&o, &e)) { fprintf(stderr, "seedgen: %s\n", e.msg); exit(1); }
    vocab_only(p, 100 + k);
    unlink(p);
}

/* Tensor data of the mini models: F32 tensors 0.5 (valid norms and RoPE factors), the
 * quantized ones a byte pattern. */
static int mini_fill(void *ctx, int index, const char *name, void *dst, size_t nbytes, sdn_err *err) {
    (void)index, (void)err;
    const uint32_t *types = ctx;
    if (types[index] == SDN_TYPE_F32) {
        float *f = dst;
        for (size_t i = 0; i < nbytes / 4; i++) f[i] = 0.5f;
    } else {
        uint8_t *b = dst;
        for (size_t i = 0; i < nbytes; i++) b[i] = (uint8_t)(i * 13 + (size_t)name[0]);
    }
    return SDN_OK;
}

/* A complete model far smaller than the make-model shapes (a few KB, so the loader target
 * runs fast): written with the project's GGUF writer, dim 32, ffn 64, 4 heads / 2 KV
 * heads, vocabulary 40, one layer; matrices of type `mt`; qwen2 adds QKV biases, llama3
 * adds rope_freqs and a linear rope scaling. */
static void mini_model(const char *arch, uint32_t mt, int llama3, const char *name) {
    sdn_gguf_writer *w = sdn_gguf_writer_new();
    char k[96];
    sdn_gguf_w_str(w, "general.architecture", arch);
#define KEY(s) (snprintf(k, sizeof k, "%s.%s", arch, s), k)
    sdn_gguf_w_u32(w, KEY("block_count"), 1);
    sdn_gguf_w_u32(w, KEY("embedding_length"), 32);
    sdn_gguf_w_u32(w, KEY("feed_forward_length"), 64);
    sdn_gguf_w_u32(w, KEY("attention.head_count"), 4);
    sdn_gguf_w_u32(w, KEY("attention.head_count_kv"), 2);
    sdn_gguf_w_u32(w, KEY("context_length"), 64);
    sdn_gguf_w_f32(w, KEY("attention.layer_norm_rms_epsilon"), 1e-5f);
    sdn_gguf_w_f32(w, KEY("rope.freq_base"), 10000.0f);
    if (llama3) {
        sdn_gguf_w_u32(w, KEY("rope.dimension_count"), 8);
        sdn_gguf_w_str(w, KEY("rope.scaling.type"), "linear");
        sdn_gguf_w_f32(w, KEY("rope.scaling.factor"), 2.0f);
    }
#undef KEY
    uint32_t types[32];
    int nt = 0;
#define T(nm, ty, nd, a, b) do { int64_t ne[2] = {a, b}; types[nt++] = ty; sdn_gguf_w_tensor(w, nm, ty, nd, ne); } while (0)
    T("token_embd.weight", mt, 2, 32, 40);
    T("output_norm.weight", SDN_TYPE_F32, 1, 32, 1);
    if (!llama3) T("output.weight", mt, 2, 32, 40);
    if (llama3) T("rope_freqs.weight", SDN_TYPE_F32, 1, 4, 1);
    T("blk.0.attn_norm.weight", SDN_TYPE_F32, 1, 32, 1);
    T("blk.0.ffn_norm.weight", SDN_TYPE_F32, 1, 32, 1);
    T("blk.0.attn_q.weight", mt, 2, 32, 32);
    T("blk.0.attn_k.weight", mt, 2, 32, 16);
    T("blk.0.attn_v.weight", mt, 2, 32, 16);
    T("blk.0.attn_output.weight", mt, 2, 32, 32);
    T("blk.0.ffn_gate.weight", mt, 2, 32, 64);
    T("blk.0.ffn_up.weight", mt, 2, 32, 64);
    T("blk.0.ffn_down.weight", mt, 2, 64, 32);
    if (!strcmp(arch, "qwen2")) {
        T("blk.0.attn_q.bias", SDN_TYPE_F32, 1, 32, 1);
        T("blk.0.attn_k.bias", SDN_TYPE_F32, 1, 16, 1);
        T("blk.0.attn_v.bias", SDN_TYPE_F32, 1, 16, 1);
    }
#undef T
    write_gguf(w, "gguf_model", name, mini_fill, types);
}

/* UTF-8 of GPT-2's byte-to-character mapping of byte b into out (returns the length). */
static int byte_char(int b, char *out) {
    int cp;
    if ((b >= 33 && b <= 126) || (b >= 161 && b <= 172) || (b >= 174 && b <= 255)) cp = b;
    else {
        int n = 0;
        for (int x = 0; x < b; x++)
            if (!((x >= 33 && x <= 126) || (x >= 161 && x <= 172) || (x >= 174 && x <= 255))) n++;
        cp = 256 + n;
    }
    if (cp < 0x80) { out[0] = (char)cp; return 1; }
    out[0] = (char)(0xc0 | (cp >> 6));
    out[1] = (char)(0x80 | (cp & 0x3f));
    return 2;
}

static void bpe_seed(const char *pre, int k) {
    static const char *merges[] = {"\xc4\xa0 t", "h e", "\xc4\xa0t he", "i n", "e r", "o n", "a n", "\xc4\xa0 a", "r e", "\xc4\xa0 w"};
    static const char *merged[] = {"\xc4\xa0t", "he", "\xc4\xa0the", "in", "er", "on", "an", ("\xc4\xa0" "a"), "re", "\xc4\xa0w"};
    static const char *special[] = {"<|endoftext|>", "<|im_start|>", "<|im_end|>"};
    int nm = 10, n = 256 + nm + 3;
    char **tok = malloc((size_t)n * sizeof *tok);
    int32_t *type = malloc((size_t)n * sizeof *type);
    for (int b = 0; b < 256; b++) {
        tok[b] = calloc(1, 4);
        byte_char(b, tok[b]);
        type[b] = 1;
    }
    for (int i = 0; i < nm; i++) tok[256 + i] = strdup(merged[i]), type[256 + i] = 1;
    for (int i = 0; i < 3; i++) tok[256 + nm + i] = strdup(special[i]), type[256 + nm + i] = 3;
    sdn_gguf_writer *w = sdn_gguf_writer_new();
    sdn_gguf_w_str(w, "general.architecture", "qwen2");
    sdn_gguf_w_str(w, "tokenizer.ggml.model", "gpt2");
    sdn_gguf_w_str(w, "tokenizer.ggml.pre", pre);
    sdn_gguf_w_arr_str(w, "tokenizer.ggml.tokens", (const char *const *)tok, NULL, (uint64_t)n);
    sdn_gguf_w_arr_i32(w, "tokenizer.ggml.token_type", type, (uint64_t)n);
    sdn_gguf_w_arr_str(w, "tokenizer.ggml.merges", merges, NULL, (uint64_t)nm);
    sdn_gguf_w_u32(w, "tokenizer.ggml.eos_token_id", (uint32_t)(256 + nm));
    sdn_gguf_w_u32(w, "tokenizer.ggml.bos_token_id", (uint32_t)(256 + nm));
    sdn_gguf_w_bool(w, "tokenizer.ggml.add_bos_token", k == 2);
    sdn_gguf_w_str(w, "tokenizer.chat_template", "{% for message in messages %}<|im_start|>{{ message['role'] }}<|im_end|>{% endfor %}");
    char name[64];
    snprintf(name, sizeof name, "bpe-%s.gguf", pre);
    write_gguf(w, "gguf_tokenizer", name, NULL, NULL);
    for (int i = 0; i < n; i++) free(tok[i]);
    free(tok);
    free(type);
}

int main(int argc, char **argv) {
    if (argc < 2) {
        fprintf(stderr, "usage: seedgen DIR [GGUF...]\n");
        return 2;
    }
    snprintf(root, sizeof root, "%s", argv[1]);
    mkdir(root, 0755);
    for (int i = 2; i < argc; i++) vocab_only(argv[i], i - 2);
    /* make-model GGUFs only give their vocabularies (as model seeds they are 0.4-0.8 MB,
     * which slows the loader target 10x); the model seeds are the mini models */
    model_seed("tiny-llama3", "Q4_0", 0);
    model_seed("tiny-qwen2", "Q8_0", 1);
    mini_model("llama", SDN_TYPE_F32, 0, "mini-llama-f32.gguf");
    mini_model("llama", SDN_TYPE_Q8_0, 1, "mini-llama3-q8_0.gguf");
    mini_model("qwen2", SDN_TYPE_Q4_0, 0, "mini-qwen2-q4_0.gguf");
    mini_model("qwen2", SDN_TYPE_F16, 0, "mini-qwen2-f16.gguf");
    bpe_seed("gpt2", 0);
    bpe_seed("qwen2", 1);
    bpe_seed("llama-bpe", 2);
    llama2c(0, 1);
    llama2c(0, 0);
    llama2c(1, 1);
    llama2c(1, 0);
    for (int k = 0; k < 3; k++) sam_seed(k);
    history_seed(0);
    history_seed(1);
    trace_seed();
    text_seeds();
    return 0;
}
