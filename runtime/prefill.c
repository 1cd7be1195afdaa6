/* prefill.c - the prompt into the KV cache (prefill.h): forward passes of up to `chunk` rows,
 * and at each block boundary the prefix cache first. A block the cache has is imported (and
 * its predictions made again from its last-layer outputs); a block it lacks is claimed, so a
 * second context wanting it waits instead of computing it too, then computed with the
 * following absent blocks in one pass, and published. A block another context is computing
 * is waited for, holding no claim of one's own (so two contexts never wait on each other). */
#include "runtime/prefill.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/sdn_util.h"
#include "kernels/kernel_path.h"
#include "modelfile/model.h"

#define PREFIX_FORMAT 1 /* the block image: KV tiles (attention/kv_cache.h) + last-layer outputs as F32 */
#define B SDN_PREFIX_BLOCK

const char *sdn_prefill_cache_settings(const sdn_ctx *c, char *buf, size_t cap) {
    if (sdn_prefill_mm_get() == SDN_PREFILL_MM_SGEMM) return NULL;
    sdn_kv_type tk, tv;
    sdn_ctx_kv_types(c, &tk, &tv);
    const sdn_model *m = sdn_ctx_model(c);
    snprintf(buf, cap, "sdnpu prefix v%d model=%016llx k=%s v=%s path=%s block=%d dim=%d", PREFIX_FORMAT,
             (unsigned long long)sdn_model_fingerprint(m), sdn_kv_type_name(tk), sdn_kv_type_name(tv), sdn_kpath_name(sdn_kpath_get()), B,
             sdn_model_cfg(m)->dim);
    return buf;
}

/* One forward pass over positions [pos, stop). */
static int run_chunk(sdn_prefill_job *j, int pos, int stop, sdn_err *err) {
    const int K = j->topk;
    sdn_batch b = {.n = stop - pos, .tokens = j->tokens + pos, .n_logits = K ? -1 : 0, .topk = K,
                   .topk_tok = K ? j->tok + (size_t)pos * K : NULL, .topk_prob = K ? j->prob + (size_t)pos * K : NULL,
                   .topk_vocab = j->vocab, .n_topk_vocab = j->n_vocab};
    return sdn_forward(j->c, &b, NULL, err);
}

/* A cached block into the context at pos, and its positions' predictions. */
static int import_block(sdn_prefill_job *j, int pos, const uint8_t *img, size_t kv_bytes, sdn_err *err) {
    int rc = sdn_ctx_block_import(j->c, pos / B, img, j->tokens + pos, err);
    if (rc || !j->topk) return rc;
    const int K = j->topk;
    sdn_batch hb = {.n = B, .tokens = j->tokens + pos, .n_logits = -1, .topk = K, .topk_tok = j->tok + (size_t)pos * K,
                    .topk_prob = j->prob + (size_t)pos * K, .topk_vocab = j->vocab, .n_topk_vocab = j->n_vocab};
    const float *hidden = (const float *)(img + kv_bytes);
    return sdn_fwd_head(j->c, &hb, hidden, NULL, SDN_PATH_AUTO, err);
}

/* Publish the claimed blocks of a pass over [pos, stop) that took dt seconds. */
static int publish(sdn_prefill_job *j, sdn_pblock **cl, int nc, int pos, int stop, double dt, size_t kv_bytes, size_t bytes, sdn_err *err) {
    const int dim = sdn_model_cfg(sdn_ctx_model(j->c))->dim;
    const float *hidden = sdn_ctx_hidden(j->c);
    int rc = SDN_OK;
    for (int i = 0; i < nc; i++) {
        const int p0 = pos + i * B;
        uint8_t *img = rc ? NULL : malloc(bytes);
        if (!img || (rc = sdn_ctx_block_export(j->c, p0 / B, img, err))) {
            free(img);
            sdn_pcache_drop(j->pc, cl[i]);
            if (!rc) rc = sdn_fail(err, SDN_ENOMEM, "out of memory (prefix block)");
            continue;
        }
        memcpy(img + kv_bytes, hidden + (size_t)(p0 - pos) * dim, sizeof(float) * (size_t)B * dim);
        sdn_pcache_publish(j->pc, cl[i], img, dt * B / (stop - pos));
    }
    return rc;
}

int sdn_prefill(sdn_prefill_job *j, sdn_err *err) {
    j->n_mem = j->n_disk = 0;
    j->saved_s = 0;
    const int n = j->n, chunk = j->chunk;
    char sbuf[256];
    const char *settings = j->pc ? sdn_prefill_cache_settings(j->c, sbuf, sizeof sbuf) : NULL;
    sdn_pcache *pc = settings ? j->pc : NULL;
    const size_t kv_bytes = sdn_ctx_block_bytes(j->c);
    const size_t bytes = kv_bytes + sizeof(float) * (size_t)B * sdn_model_cfg(sdn_ctx_model(j->c))->dim;
    const int nblk = n / B;
    sdn_pkey *keys = NULL;
    sdn_pblock **cl = NULL;
    if (pc && nblk > 0) {
        keys = malloc(sizeof *keys * (size_t)nblk);
        cl = malloc(sizeof *cl * (size_t)(chunk / B + 1));
        if (!keys || !cl) {
            free(keys);
            free(cl);
            return sdn_fail(err, SDN_ENOMEM, "out of memory (prefix keys)");
        }
        sdn_pkey k = sdn_pkey_base(settings);
        for (int i = 0; i < nblk; i++) keys[i] = k = sdn_pkey_next(k, j->tokens + (size_t)i * B);
    } else pc = NULL;
    int rc = SDN_OK, pos = j->from;
    double t_import = 0;
    if (j->on_progress) j->on_progress(j->progress_ud, pos, n);
    while (pos < n && !rc) {
        int nc = 0;
        if (pc && pos % B == 0 && pos + B <= n) {
            sdn_pblock *blk;
            int r = sdn_pcache_get(pc, keys[pos / B], j->tokens + pos, bytes, 1, &blk);
            if (r == SDN_PC_MEM || r == SDN_PC_DISK) {
                double t0 = sdn_now();
                rc = import_block(j, pos, sdn_pblock_data(blk), kv_bytes, err);
                t_import += sdn_now() - t0;
                j->saved_s += sdn_pblock_cost(blk);
                *(r == SDN_PC_MEM ? &j->n_mem : &j->n_disk) += B;
                sdn_pcache_put(pc, blk);
                pos += B;
                if (!rc && j->on_progress) j->on_progress(j->progress_ud, pos, n);
                continue;
            }
            if (r == SDN_PC_CLAIMED) cl[nc++] = blk;
            else pc = NULL; /* out of memory for the cache's own bookkeeping: go on without it */
        }
        int stop = pos + chunk < n ? pos + chunk : n;
        if (nc && stop < pos + B) stop = pos + B; /* a claimed block is computed whole (chunks below a block) */
        if (pc && nc) {
            /* more absent blocks into this pass; it ends where the cache has (or is making) one */
            int s = pos + B;
            while (s + B <= stop) {
                sdn_pblock *blk;
                int r = sdn_pcache_get(pc, keys[s / B], j->tokens + s, bytes, 0, &blk);
                if (r == SDN_PC_CLAIMED) {
                    cl[nc++] = blk;
                    s += B;
                    continue;
                }
                if (r == SDN_PC_MEM || r == SDN_PC_DISK) sdn_pcache_put(pc, blk);
                stop = s;
                break;
            }
            if (stop > s && s + B <= n) stop = s; /* a block boundary with a full block after it: look there next */
        } else if (pc && pos % B) {
            const int next = (pos / B + 1) * B; /* after the context's own entries: up to the next block */
            if (next + B <= n && next < stop) stop = next;
        }
        double t0 = sdn_now();
        rc = run_chunk(j, pos, stop, err);
        if (rc) {
            for (int i = 0; i < nc; i++) sdn_pcache_drop(pc, cl[i]);
            break;
        }
        if (nc) rc = publish(j, cl, nc, pos, stop, sdn_now() - t0, kv_bytes, bytes, err);
        pos = stop;
        if (!rc && j->on_progress) j->on_progress(j->progress_ud, pos, n);
    }
    j->saved_s -= t_import;
    if (j->saved_s < 0) j->saved_s = 0;
    free(keys);
    free(cl);
    return rc;
}
