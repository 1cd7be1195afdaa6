/* attention_amx.c - the bf16 cache's score products on AMX-BF16 tiles (TDPBF16PS), the amx
 * path's kernel for bf16 keys when the CPU has AMX-BF16 (attention.c, kernels_for). Compiled
 * with the avx512bf16 variant's flags (CMakeLists.txt); the tile instructions are inline asm,
 * as in kernels/matmul_cols_avx2.c (GCC 12's _tile_loadconfig can drop the stores that fill
 * the configuration).
 *
 * The arithmetic is the instruction's own, not attention_kern.h's statement: TDPBF16PS does
 * not sum a tile's pairs as a chain of rounded FMAs in either order (measured on a Sapphire
 * Rapids-class Xeon: about a third of the lanes of 16-pair dot products differ from the even-
 * first chain, the odd-first chain and a single rounding of the exact sum alike;
 * scripts/reference/probe_amx_bf16.c). What it does give, and what this kernel relies on
 * (test_attention, test_amx_bf16_scores): each lane of C is a function of its query row, its
 * key column and C's previous value only - the same bits whatever the other rows and columns
 * of the tiles hold and however many rows the tiles are configured for. So on the amx path
 * every score of a bf16 key runs here, whatever the batch: a row's bits do not depend on the
 * batch size, the chunking or the other rows, and differ from the other paths' (docs/kernels.md,
 * "AMX-BF16").
 *
 * Per query i and slot j of a tile: C = 0; for each group of 16 pairs k = 0, 16, ... (hd / 2
 * pairs, hd a multiple of 32): C = TDPBF16PS(C, qb[2k .. 2k + 31], keys' pairs k .. k + 15 of
 * slot j); s_j = C * qs. */
#include <immintrin.h>
#include <stdint.h>
#include <string.h>

#include "attention/attention.h"
#include "attention/attention_kern.h"
#include "kernels/matmul_internal.h"

#if defined(__AVX512BF16__)
/* the tiles for m query rows: tmm0-3 C (m rows x 16 floats), tmm4 A (m rows x 16 pairs),
 * tmm5-7 B (16 pairs x 16 slots) */
static void amx_bf16_config(uint8_t cfg[64], int m) {
    memset(cfg, 0, 64);
    cfg[0] = 1;
    for (int t = 0; t < 8; t++) {
        cfg[16 + 2 * t] = 64;
        cfg[48 + t] = (uint8_t)(t < 5 ? m : 16);
    }
}

#define TDP(b, c) "tdpbf16ps %%tmm" #b ", %%tmm4, %%tmm" #c "\n\t"
/* C tiles += A (the rows' 16 pairs at a, stride sa) x the key tile's pairs at k (4 column
 * blocks of 16 slots, row stride 256 bytes) */
static inline __attribute__((always_inline)) void amx_kstep(const uint16_t *a, long sa, const uint16_t *k) {
    __asm__ volatile("tileloadd (%0,%1,1), %%tmm4\n\t"
                     "tileloadd (%2,%3,1), %%tmm5\n\t"
                     "tileloadd (%4,%3,1), %%tmm6\n\t"
                     "tileloadd (%5,%3,1), %%tmm7\n\t" TDP(5, 0) TDP(6, 1) TDP(7, 2)
                     "tileloadd (%6,%3,1), %%tmm5\n\t" TDP(5, 3)
                     :
                     : "r"(a), "r"(sa), "r"(k), "r"(256L), "r"(k + 32), "r"(k + 64), "r"(k + 96)
                     : "memory");
}

void sdn_att_scores_amxbf16(const sdn_att_kt *t, const sdn_att_q *q, int nq, float *sc) {
    const int hd = t->hd;
    if (t->tk != SDN_KV_BF16 || hd % 32) {
        sdn_att_scores_avx512bf16(t, q, nq, sc);
        return;
    }
    uint8_t cfg[64] __attribute__((aligned(64)));
    uint16_t abuf[16 * SDN_ATT_MAX_HD] __attribute__((aligned(64)));
    for (int i0 = 0; i0 < nq; i0 += 16) {
        const int m = nq - i0 < 16 ? nq - i0 : 16;
        if (m != sdn_amx_att_rows) { /* configured once for the thread's calls (matmul_internal.h) */
            amx_bf16_config(cfg, m);
            __asm__ volatile("ldtilecfg %0" ::"m"(*(const uint8_t(*)[64])cfg) : "memory");
            sdn_amx_att_rows = m;
        }
        /* the rows' queries: in place when they follow each other (attention.c keeps a task's
         * queries so), else gathered */
        const uint16_t *a = q[i0].qb;
        for (int i = 1; i < m; i++)
            if (q[i0 + i].qb != a + (size_t)i * hd) {
                for (int r = 0; r < m; r++) memcpy(abuf + (size_t)r * hd, q[i0 + r].qb, (size_t)hd * 2);
                a = abuf;
                break;
            }
        __asm__ volatile("tilezero %%tmm0\n\ttilezero %%tmm1\n\ttilezero %%tmm2\n\ttilezero %%tmm3" ::: "memory");
        const uint16_t *k = t->k;
        for (int g = 0; g < hd / 2; g += 16) amx_kstep(a + 2 * g, (long)hd * 2, k + (size_t)g * 128);
        float *s = sc + (size_t)i0 * 64;
        __asm__ volatile("tilestored %%tmm0, (%0,%4,1)\n\t"
                         "tilestored %%tmm1, (%1,%4,1)\n\t"
                         "tilestored %%tmm2, (%2,%4,1)\n\t"
                         "tilestored %%tmm3, (%3,%4,1)"
                         :
                         : "r"(s), "r"(s + 16), "r"(s + 32), "r"(s + 48), "r"(256L)
                         : "memory");
        for (int i = 0; i < m; i++) {
            const __m512 qs = _mm512_set1_ps(q[i0 + i].qs);
            float *si = s + (size_t)i * 64;
            for (int c = 0; c < 4; c++) _mm512_storeu_ps(si + 16 * c, _mm512_mul_ps(_mm512_loadu_ps(si + 16 * c), qs));
        }
    }
    /* the tiles stay configured for the next call (no tilerelease) */
}
#endif
