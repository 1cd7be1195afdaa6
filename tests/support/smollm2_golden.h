/* smollm2_golden.h - reader of tests/golden/smollm2/llamacpp.jsonl, llama.cpp's reference
 * outputs for SmolLM2-135M-Instruct (written by scripts/reference/smollm2_golden.py): one
 * header line, then "request" lines (rendered prompt, its ids, llama.cpp's greedy answer and
 * the top-k logits at every answer position) and "chat" lines (messages, rendered text, ids). */
#ifndef SDN_SMOLLM2_GOLDEN_H
#define SDN_SMOLLM2_GOLDEN_H

#include <stdint.h>

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

#endif
