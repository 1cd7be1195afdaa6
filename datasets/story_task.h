/* story_task.h - a generated "story" task for models that cannot do the Spec-Bench tasks
 * (TinyStories cannot summarize news or answer questions over Wikipedia passages).
 *
 * Each row's context is a story the model itself wrote by sampling (temperature, a few
 * hundred tokens, from one of a fixed list of openings, seeded), and the prompt is that
 * story's first sentence: the request asks the model to continue a story it has in its
 * context, which is what retrieval drafting is for. Nothing is written by hand: the text is
 * the model's. Rows: {"id": "story-<seed>-<i>", "task": "story", "group": "story",
 * "context": story, "prompt": first sentence, "reference": null, "meta": {"generator":
 * "sdnpu make-story-task", "model": ..., "model_fingerprint": ..., "seed": ...,
 * "temperature": ..., "opening": ..., "story_tokens": ...}}. */
#ifndef SDN_STORY_TASK_H
#define SDN_STORY_TASK_H

#include <stdint.h>
#include <stdio.h>

#include "common/sdn_err.h"
#include "modelfile/model.h"

typedef struct sdn_story_opts {
    int n;            /* rows (default 40) */
    uint64_t seed;    /* base seed; row i samples with seed + i (default 1) */
    float temp;       /* sampling temperature (default 0.8) */
    int story_tokens; /* tokens sampled per story at most (default 300) */
    int min_tokens;   /* shorter stories are re-sampled with another seed (default 80) */
    int threads;
} sdn_story_opts;

/* Write n rows to `out`. The model must have a tokenizer. */
int sdn_story_task_write(sdn_model *m, const char *model_name, const sdn_story_opts *o, FILE *out, sdn_err *err);

/* The first sentence of text: up to and including the first '.', '!' or '?' that is
 * followed by whitespace, a quote or the end; without one, the first 12 words. malloc'd. */
char *sdn_first_sentence(const char *text);

#endif
