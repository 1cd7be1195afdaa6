/* ref_model.h - a deliberately naive reference transformer for tests: reads a GGUF file
 * directly (its own metadata and tensor-name lookups, not the engine's loader), dequantizes
 * every weight to F32 up front, and runs one token at a time in double precision with plain
 * loops, exactly as the architectures define the computation. Slow and simple on purpose. */
#ifndef SDN_REF_MODEL_H
#define SDN_REF_MODEL_H

#include <stdint.h>

typedef struct ref_model ref_model;

/* NULL on failure (message printed). */
ref_model *ref_model_load(const char *gguf_path);
void ref_model_free(ref_model *r);
int ref_model_vocab(const ref_model *r);
/* Reset the sequence. */
void ref_model_reset(ref_model *r);
/* Feed one token at the next position; writes the logits (vocab floats; NULL: not computed, for
 * positions whose prediction is not compared: the LM head is a fifth of a step). */
void ref_model_step(ref_model *r, int32_t token, float *logits);

#endif
