/* trace_import.h - traces from text-only model outputs (answers recorded elsewhere, such as
 * ../shared/datasets/model_outputs/: Vicuna-7B-v1.3 greedy answers to the Spec-Bench
 * summary and RAG questions).
 *
 * Each answer is joined with its question by id. The prompt is rendered as the model saw
 * it: the question's original input ("input"; else the context and prompt as one user
 * turn, request.h style) as the single user turn of the chat template (Vicuna v1.1 for
 * these files: system prompt, " USER: <turn> ASSISTANT:"), tokenized with the model's
 * tokenizer, BOS first. The output text is tokenized as the model produced it: the model
 * generated the answer right after "ASSISTANT:", so its first token carries the word's
 * leading space ("▁Hill"), which the recorded text lost when it was detokenized and
 * stripped; SentencePiece's dummy-prefix rule (tokenizing the text on its own, without
 * BOS) puts that space back. No end-of-generation token is in the text: an answer shorter
 * than max_new tokens (by the file's "new_tokens" when present, else by our count) ended
 * with the tokenizer's EOS ("stop": "eog"), otherwise with the limit ("stop": "length").
 * The result has no prefill predictions (preds_k 0) and no model fingerprint: methods that
 * need predictions cannot be studied on it.
 *
 * Re-tokenized text is not always the token sequence the model emitted (a model can emit a
 * non-canonical split, and trailing whitespace was stripped), so acceptance measured on
 * such traces is an estimate of the live figure, usually within a percent or two. */
#ifndef SDN_TRACE_IMPORT_H
#define SDN_TRACE_IMPORT_H

#include <stdio.h>

#include "common/sdn_err.h"
#include "datasets/dataset.h"
#include "tokenizer/chat_template.h"
#include "tokenizer/tokenizer.h"

typedef struct sdn_import_opts {
    const sdn_tokenizer *tok;
    sdn_chat_kind chat;          /* template family (SDN_CHAT_VICUNA for the Vicuna files) */
    const char *system;          /* NULL: the template's default system prompt */
    int max_new;                 /* the generation limit of the recorded run (default 1024) */
    const char *model_name;      /* stored as the trace's "model" (default: the answers' model_id) */
    const char *tokenizer_name;  /* stored as "tokenizer" */
    const sdn_answers *agree;    /* optional: keep only answers whose text equals this run's */
    const char *tasks;           /* comma-separated task filter (NULL: all) */
    const char *answers_name;    /* the answers file, recorded in each row's "source" */
} sdn_import_opts;

typedef struct sdn_import_stats {
    int written;
    int no_question;   /* answers whose id is not among the questions */
    int disagree;      /* dropped by the agreement filter (or missing in the other run) */
    int filtered;      /* dropped by the task filter */
} sdn_import_stats;

int sdn_trace_import(const sdn_dataset *questions, const sdn_answers *answers, const sdn_import_opts *o, FILE *out, sdn_import_stats *st,
                     sdn_err *err);

#endif
