/* grammar_int.h - internals of grammar/ shared by its files: the compiled rule format, the
 * matcher's state layout and the helpers one file offers the others. Not a public header. */
#ifndef SDN_GRAMMAR_INT_H
#define SDN_GRAMMAR_INT_H

#include <stddef.h>
#include <stdint.h>

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

#include "grammar/grammar.h"

/* Limits on untrusted grammars and schemas (errors name them). */
#define G_MAX_TEXT (4u << 20)      /* bytes of GBNF or schema text */
#define G_MAX_ELEMS (1u << 22)     /* compiled elements */
#define G_MAX_NEST 200             /* parenthesis nesting in GBNF, object/array nesting in a schema */
#define G_MAX_REPEAT 1000          /* m and n of {m,n}, minItems/maxItems, minLength/maxLength */
#define G_MAX_CHAIN 1000           /* longest chain of rules entered without consuming a byte */
/* Limits of the matcher: beyond them a step fails with -1 (as out of memory). */
#define G_MAX_STACKS 1024          /* alternative parses kept at once */
#define G_MAX_DEPTH 8192           /* elements on one stack (nesting of the text) */
#define G_MAX_WORK (1u << 20)      /* rule expansions + stack words hashed in one step */
#define G_MAX_PATTERN_BYTES 65536  /* content of one pattern-checked string */

/* Compiled element types. A rule is its alternatives' elements one after the other, each
 * alternative ended by G_ALT except the last, ended by G_END. */
enum { G_END = 0, G_ALT = 1, G_REF = 2, G_CHAR = 3, G_PAT = 4 };

typedef struct gel {
    uint32_t type; /* G_* */
    uint32_t a;    /* G_REF: rule; G_CHAR: class; G_PAT: pattern */
} gel;

/* A character class: sorted, merged, disjoint code point ranges, possibly negated; the
 * ASCII part as a bitmap (negation applied). */
typedef struct gclass {
    uint32_t ascii[4];
    uint32_t roff, rn; /* ranges[2*roff ...], rn pairs [lo, hi] */
    uint32_t neg;
} gclass;

/* A pattern-checked JSON string (schema "pattern" with minLength/maxLength): the element
 * matches the string's content (JSON escapes decoded) and its closing quote. */
typedef struct gpat {
    pcre2_code *re;  /* the pattern (NULL: none, length bounds only) */
    int anchored;    /* PCRE2 says it is anchored: partial matching decides viability */
    int uniform;     /* the pattern cannot tell non-ASCII characters apart (see schema.c) */
    uint32_t min, max; /* length bounds in code points */
} gpat;

struct sdn_grammar {
    gel *el;
    uint32_t n_el;
    uint32_t *rule_start; /* first element of each rule */
    char **names;
    uint32_t n_rules;
    gclass *cls;
    uint32_t n_cls;
    uint32_t *ranges;
    gpat *pats;
    uint32_t n_pats;
    size_t max_stack_words; /* never used: reserved */
};

/* Matcher state. Stacks are packed in w: each is [L, P, aux, L element indices (bottom
 * first, the top is the next element to match), ceil(P/4) words of pattern content]; P and
 * aux are 0 unless the top is a G_PAT (content bytes so far, escape state). */
struct sdn_gstate {
    const sdn_grammar *g;
    uint32_t n;     /* stacks */
    uint32_t nw;    /* words used */
    uint32_t cap_w, cap_n;
    uint32_t *w;
    uint32_t *off;  /* offset of each stack in w */
    uint32_t *hash; /* of each stack */
    uint8_t ended;
    uint8_t skip_ls; /* sdn_gstate_set_skip_leading_space, until the first text token */
    uint8_t pu_need; /* continuation bytes still expected of a partial UTF-8 character */
    uint8_t pu_n;    /* bytes of it seen */
    uint8_t pu[4];
    uint32_t *tmp;   /* scratch stack used by the expansion */
    uint32_t cap_tmp;
    uint32_t work;   /* work units of the current step (G_MAX_WORK) */
    uint32_t *hs;    /* hash set of the stacks being built (index + 1), once there are 16 */
    uint32_t hs_cap;
    int hs_on;
    uint8_t *pb;     /* pattern content being built */
    uint32_t cap_pb;
    struct sdn_gstate *scr[2]; /* scratch states for trial steps (lazily made) */
    pcre2_match_data *md;
    struct sdn_gstate **dfs; /* per-depth states of the vocabulary walk (vocab.c) */
    uint32_t n_dfs;
    uint8_t *allowed;        /* per-token flags of the vocabulary walk */
    int n_allowed;
};

/* Parse GBNF; allow_internal enables the element "@P<n>" (pattern n of pats, which the
 * grammar takes over on success and on failure). Errors are prefixed with prefix. */
int g_parse(const char *text, size_t len, int allow_internal, gpat *pats, uint32_t n_pats,
            sdn_grammar **out, sdn_err *err);
int g_class_match(const sdn_grammar *g, uint32_t c, uint32_t cp);

/* Matcher internals used by vocab.c. */
int gs_reserve(sdn_gstate *s, uint32_t words, uint32_t stacks);
/* dst := src advanced by byte b: 1 ok, 0 rejected (dst undefined), -1 limits/memory. */
int gs_step(sdn_gstate *dst, const sdn_gstate *src, uint8_t b);
sdn_gstate *gs_alloc(const sdn_grammar *g);
int gs_scratch(const sdn_gstate *s); /* makes s->scr[0..1]; 0 or -1 */
/* Run n bytes from s through its scratch states: 1 (result in s->scr[*which]), 0, -1. */
int gs_run(const sdn_gstate *s, const uint8_t *b, size_t n, int *which);
void gs_set_ended(sdn_gstate *s);
void gs_free_one(sdn_gstate *s); /* a state without its scratch states */

#endif
