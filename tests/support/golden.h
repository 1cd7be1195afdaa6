/* golden.h - the one harness of the llama.cpp golden-file tests (test_smollm2, test_gemma3,
 * test_qwen3, test_arch_golden): the reader of tests/golden/FAMILY/NAME.jsonl, llama.cpp's
 * reference outputs (written by scripts/reference/smollm2_golden.py and family_golden.py: one
 * header line, then "request" lines with the rendered prompt, its ids, llama.cpp's greedy
 * answer and the top-k logits at every answer position, and "chat" lines with messages,
 * rendered text and ids), and the checks the three model tests share: prompt rendering and
 * ids, chat cases, teacher-forced logits scored against llama.cpp's top-k, every drafting
 * method against plain decoding, and the three-way comparison with exact arithmetic.
 * Every function fails the running CMocka test with a message naming the request. */
#ifndef SDN_TEST_GOLDEN_H
#define SDN_TEST_GOLDEN_H

#include <stdint.h>

#include "engine/forward.h"
#include "support/ref_model.h"
#include "tokenizer/chat_template.h"

typedef struct sg_request {
    char *id, *task, *context, *prompt, *rendered;
    int32_t *prompt_ids;
    int n_prompt;
    int32_t *answer_ids;
    int n_answer;
    int stopped_at_eog;
    int max_new, topk;
    int n_top;          /* positions with top-k lists (n_answer, + 1 when it stopped at EOG) */
    int32_t *top_ids;   /* [n_top * topk] */
    float *top_logits;  /* [n_top * topk] */
} sg_request;

typedef struct sg_chat {
    sdn_chat_msg *msgs;
    int n_msgs;
    char *rendered;
    int32_t *ids;
    int n_ids;
} sg_chat;

typedef struct sg_golden {
    int n, n_chat;
    sg_request *req;
    sg_chat *chat;
} sg_golden;

/* Load the file; fails the running test (cmocka fail_msg) on any malformed line. */
sg_golden *sg_load(const char *path);
void sg_free(sg_golden *g);
/* summary 0, rag 1, ui 2, tweet 3 (fails the test on another task name). */
int sg_task_index(const char *task);

/* Every request rendered with `chat_template` (NULL: the model's own) and tokenized: text and
 * ids must equal llama.cpp's (the message names the request and the first difference).
 * tasks[4] (may be NULL) gets the requests per task. */
void sg_check_prompts(const sdn_model *m, const sg_golden *g, const char *chat_template, int tasks[4]);

/* Every chat case rendered with template `ct` and tokenized by the model's tokenizer equals
 * llama.cpp's rendering and ids. */
void sg_check_chats(const sdn_model *m, const sg_golden *g, const sdn_chat_template *ct);

/* How the teacher-forced positions run: the prompt but its last token in chunks of
 * prefill_chunk rows (batch-invariant path when prefill_invariant), then the n_top answer
 * positions in chunks of answer_chunk rows (batch-invariant when answer_invariant). */
typedef struct sg_path {
    int prefill_chunk, prefill_invariant;
    int answer_chunk, answer_invariant;
} sg_path;

/* Teacher forcing of request q on context c (truncated to 0 first): the logits of the q->n_top
 * answer positions, [n_top][vocab], malloc'd. */
float *sg_teacher_logits(sdn_ctx *c, const sg_request *q, const sg_path *path);
/* The same with the first `kept` prompt entries already in c's cache (the caller ran this
 * prompt on c last): c is truncated to kept, not 0, and the prompt prefilled from there. The
 * logits are the same bits as sg_teacher_logits' (a reused prefix changes nothing:
 * test_forward's test_chunk_invariance); two golden files of one prompt share its prefill. */
float *sg_teacher_logits_kept(sdn_ctx *c, const sg_request *q, const sg_path *path, int kept);

/* Scores of sdnpu's logits against llama.cpp's top-k, accumulated over positions. */
typedef struct sg_score {
    int total, agree1, agree2; /* positions; top-1 equal to llama.cpp's; second-ranked equal */
    int not_ties;              /* top-1 disagreements that are not near-ties (margin > tie_tol) */
    float worst_margin;        /* largest llama.cpp margin between its top-1 and sdnpu's */
    float max_diff;            /* largest |logit difference| over llama.cpp's top-k */
    double max_rel;            /* the same relative to |llama.cpp's top-1 logit| (at least 1) */
    const char *worst_id;      /* request of max_diff */
} sg_score;

/* Adds answer position p of request q (logits l over V tokens) to s. tie_tol > 0 prints each
 * top-1 disagreement with its margin in llama.cpp's logits and counts those above tie_tol. */
void sg_score_position(sg_score *s, const float *l, int V, const sg_request *q, int p, float tie_tol);

/* Teacher-forced scores over every stride-th request of g (sg_teacher_logits + sg_score_position). */
void sg_score_teacher_forced(sdn_ctx *c, const sg_golden *g, int stride, const sg_path *path, float tie_tol, sg_score *s);

/* Greedy output of each drafting method equals plain decoding ("none") on request q, token for
 * token; steps/tokens (arrays of n_methods, may be NULL) accumulate each method's steps and
 * tokens. Returns the plain answer's length. */
int sg_methods_identical(sdn_ctx *c, const sg_request *q, const char *const *methods, int n_methods, long *steps, long *tokens);

/* The three-way check against exact arithmetic on request q's first npos answer positions:
 * sdnpu's logits (prompt prefilled, answer on the batch-invariant decode path) and llama.cpp's
 * golden logits, each against `ref`, the naive double-precision reference model of the same
 * file (tests/support/ref_model.c). Accumulates into x, over llama.cpp's top-k tokens. */
typedef struct sg_exact {
    int positions;
    int sdn_top1, ll_top1; /* top-1 equal to the exact top-1 */
    int sdn_top2, ll_top2; /* second-ranked equal to the exact second-ranked */
    double sdn_diff, ll_diff; /* largest |logit - exact logit| */
} sg_exact;
void sg_exact_compare(sdn_model *m, ref_model *ref, const sg_request *q, int npos, sg_exact *x);

#endif
