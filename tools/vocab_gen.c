/* vocab_gen.c - trains the small SentencePiece-style BPE vocabulary of make-model on the
 * built-in corpus (see vocab_gen.h). Words are the corpus split before each space, with
 * the space written as U+2581 and a leading one added (SentencePiece's dummy prefix);
 * symbols start as UTF-8 characters; each round merges the most frequent adjacent pair
 * (ties: the pair seen first), until the vocabulary is full or no pair occurs twice. */
#include "tools/vocab_gen.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define SPACE "\xe2\x96\x81" /* U+2581 */

typedef struct word {
    char **sym;
    int n;
    int count;
} word;

static char *dup2(const char *a, const char *b) {
    size_t la = strlen(a), lb = strlen(b);
    char *s = malloc(la + lb + 1);
    if (!s) return NULL;
    memcpy(s, a, la);
    memcpy(s + la, b, lb + 1);
    return s;
}

typedef struct pair_slot {
    const char *a, *b;
    int count, order;
} pair_slot;

static unsigned hash_str(const char *s) {
    unsigned h = 2166136261u;
    while (*s) h = (h ^ (unsigned char)*s++) * 16777619u;
    return h;
}

static int utf8_len(unsigned char c) { return c < 0x80 ? 1 : (c >> 5) == 6 ? 2 : (c >> 4) == 14 ? 3 : (c >> 3) == 30 ? 4 : 1; }

void sdn_vocab_free(sdn_vocab *v) {
    if (!v->piece) return;
    for (int i = 0; i < v->n; i++) free(v->piece[i]);
    free(v->piece);
    free(v->score);
    free(v->type);
    memset(v, 0, sizeof *v);
}

/* Grow *arr (of *cap elements of `size` bytes) to hold n + 1; 0 on success, -1 out of memory
 * (the array is left as it was). */
static int grow(void *arr, int *cap, int n, size_t size, int first) {
    if (n < *cap) return 0;
    int nc = *cap ? *cap * 2 : first;
    void *p = realloc(*(void **)arr, (size_t)nc * size);
    if (!p) return -1;
    *(void **)arr = p;
    *cap = nc;
    return 0;
}

/* 0 added (or no room left), -1 out of memory */
static int add_piece(sdn_vocab *v, int cap, const char *p, float score, int type) {
    if (v->n >= cap) return 0;
    if (!(v->piece[v->n] = strdup(p))) return -1;
    v->score[v->n] = score;
    v->type[v->n] = type;
    v->n++;
    return 0;
}

static void free_words(word *words, int nw) {
    for (int w = 0; w < nw; w++) {
        for (int s = 0; s < words[w].n; s++) free(words[w].sym[s]);
        free(words[w].sym);
    }
    free(words);
}

static int has_piece(const sdn_vocab *v, const char *p) {
    for (int i = 0; i < v->n; i++)
        if (!strcmp(v->piece[i], p)) return 1;
    return 0;
}

int sdn_vocab_generate(int n, sdn_vocab *v, sdn_err *err) {
    memset(v, 0, sizeof *v);
    if (n < 300 || n > 4000000) return sdn_fail(err, SDN_EINVAL, "generated vocabulary size %d out of range (300..4000000)", n);
    v->piece = calloc((size_t)n, sizeof *v->piece);
    v->score = calloc((size_t)n, sizeof *v->score);
    v->type = calloc((size_t)n, sizeof *v->type);
    /* every allocation below is checked: out of memory frees what was built and fails */
    word *words = NULL;
    int nw = 0, capw = 0;
    char **sym = NULL;
    int ns = 0;
    pair_slot *tab = NULL;
    char *a = NULL, *b = NULL, *merged = NULL;
    if (!v->piece || !v->score || !v->type) goto oom;
    if (add_piece(v, n, "<unk>", 0, 2) || add_piece(v, n, "<s>", 0, 3) || add_piece(v, n, "</s>", 0, 3)) goto oom;
    for (int c = 0; c < 256; c++) {
        char p[8];
        snprintf(p, sizeof p, "<0x%02X>", c);
        if (add_piece(v, n, p, 0, 6)) goto oom;
    }
    /* split the corpus into words */
    const char *text = sdn_builtin_corpus;
    size_t tl = strlen(text);
    size_t i = 0;
    while (i < tl) {
        /* a word: optional run of spaces/newlines handled as its own symbols, then letters up to the next space */
        sym = NULL;
        ns = 0;
        int caps = 0;
        int first = 1;
        while (i < tl && (first || text[i] != ' ')) {
            char ch[8];
            int l;
            if (text[i] == ' ') { strcpy(ch, SPACE); l = 1; }
            else { l = utf8_len((unsigned char)text[i]); memcpy(ch, text + i, (size_t)l); ch[l] = 0; }
            if (first && text[i] != ' ' && nw == 0) {
                /* dummy prefix for the very first word */
                if (grow(&sym, &caps, ns, sizeof *sym, 16) || !(sym[ns] = strdup(SPACE))) goto oom;
                ns++;
            }
            if (grow(&sym, &caps, ns, sizeof *sym, 16) || !(sym[ns] = strdup(ch))) goto oom;
            ns++;
            i += (size_t)l;
            first = 0;
            if (ch[0] == '\n') break;
        }
        /* merge identical words */
        int found = -1;
        for (int w = 0; w < nw && found < 0; w++) {
            if (words[w].n != ns) continue;
            int same = 1;
            for (int s = 0; s < ns && same; s++) same = !strcmp(words[w].sym[s], sym[s]);
            if (same) found = w;
        }
        if (found >= 0) {
            words[found].count++;
            for (int s = 0; s < ns; s++) free(sym[s]);
            free(sym);
        } else {
            if (grow(&words, &capw, nw, sizeof *words, 256)) goto oom;
            words[nw++] = (word){sym, ns, 1};
        }
        sym = NULL;
        ns = 0;
    }
    /* characters */
    for (int w = 0; w < nw; w++)
        for (int s = 0; s < words[w].n; s++)
            if (!has_piece(v, words[w].sym[s]) && strcmp(words[w].sym[s], "\n") != 0 && add_piece(v, n, words[w].sym[s], -1e6f, 1))
                goto oom;
    /* merges: each round counts adjacent pairs in a hash table, merges the most frequent
     * (ties: the pair met first in corpus order) everywhere, and records the new piece */
    int rank = 0, tcap = 1 << 15;
    if (!(tab = malloc((size_t)tcap * sizeof *tab))) goto oom;
    while (v->n < n) {
        memset(tab, 0, (size_t)tcap * sizeof *tab);
        int best = -1, order = 0;
        for (int w = 0; w < nw; w++)
            for (int s = 0; s + 1 < words[w].n; s++) {
                const char *a = words[w].sym[s], *b = words[w].sym[s + 1];
                if (!strcmp(a, "\n") || !strcmp(b, "\n")) continue;
                unsigned h = (hash_str(a) * 31u + hash_str(b)) & (unsigned)(tcap - 1);
                while (tab[h].a && (strcmp(tab[h].a, a) || strcmp(tab[h].b, b))) h = (h + 1) & (unsigned)(tcap - 1);
                if (!tab[h].a) { tab[h].a = a; tab[h].b = b; tab[h].order = order++; }
                tab[h].count += words[w].count;
                if (best < 0 || tab[h].count > tab[best].count || (tab[h].count == tab[best].count && tab[h].order < tab[best].order))
                    best = (int)h;
            }
        if (best < 0 || tab[best].count < 2) break;
        a = strdup(tab[best].a);
        b = strdup(tab[best].b);
        merged = a && b ? dup2(a, b) : NULL;
        if (!merged || (!has_piece(v, merged) && add_piece(v, n, merged, -(float)rank, 1))) goto oom;
        rank++;
        for (int w = 0; w < nw; w++) {
            int o = 0;
            for (int s = 0; s < words[w].n; s++) {
                if (s + 1 < words[w].n && !strcmp(words[w].sym[s], a) && !strcmp(words[w].sym[s + 1], b)) {
                    char *m = strdup(merged);
                    if (!m) {
                        /* keep the word consistent for free_words: the rest moved down, the pair as it was */
                        for (int t = s; t < words[w].n; t++) words[w].sym[o++] = words[w].sym[t];
                        words[w].n = o;
                        goto oom;
                    }
                    free(words[w].sym[s]);
                    free(words[w].sym[s + 1]);
                    words[w].sym[o++] = m;
                    s++;
                } else words[w].sym[o++] = words[w].sym[s];
            }
            words[w].n = o;
        }
        free(merged); free(a); free(b);
        a = b = merged = NULL;
    }
    free(tab);
    tab = NULL;
    free_words(words, nw);
    words = NULL;
    for (int u = 0; v->n < n; u++) {
        char p[32];
        snprintf(p, sizeof p, "<unused_%d>", u);
        if (add_piece(v, n, p, -1e9f, 5)) goto oom;
    }
    return SDN_OK;
oom:
    for (int s = 0; s < ns; s++) free(sym[s]);
    free(sym);
    free_words(words, nw);
    free(tab);
    free(a);
    free(b);
    free(merged);
    if (v->piece) sdn_vocab_free(v);
    else {
        free(v->score);
        free(v->type);
    }
    memset(v, 0, sizeof *v);
    return sdn_fail(err, SDN_ENOMEM, "generating the vocabulary: out of memory");
}
