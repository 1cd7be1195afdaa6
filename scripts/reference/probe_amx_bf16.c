/* probe_amx_bf16.c - what TDPBF16PS (AMX-BF16) computes, against candidate statements of it:
 * the evidence behind attention/attention_amx.c (docs/kernels.md, "AMX-BF16"). Not part of
 * the build or the tests; run it on a CPU with AMX-BF16 (Linux):
 *
 *   gcc -O2 -frounding-math scripts/reference/probe_amx_bf16.c -o /tmp/probe_amx_bf16 -lm
 *   /tmp/probe_amx_bf16
 *
 * For dot products of 1, 2, 4 and 16 pairs (the rest of the tile zero), C starting at 0, random
 * BF16 operands of magnitudes 2^-10 .. 2^(-10 + span), it counts the lanes whose result equals
 * each statement: the even-first and odd-first chains of rounded additions (VDPBF16PS's SDM
 * pseudocode is odd-first), each pair's two exact products summed exactly and added with one
 * rounding, a pairwise tree of rounded pair sums, and the exact sum rounded once (to nearest
 * even; the pair-exact statement also toward zero, the direction that matched it best). Then two invariance checks: a row moved to another place in A
 * (other rows random, fewer rows configured) and a column moved in B give the same bits.
 * Intel SDM and ISE reference (TDPBF16PS) for the instruction's operands and layout. */
#include <fenv.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

static uint64_t rs = 0x9E3779B97F4A7C15ull;
static uint64_t rnd(void) {
    rs ^= rs << 13;
    rs ^= rs >> 7;
    rs ^= rs << 17;
    return rs;
}
static float b2f(uint16_t b) {
    const uint32_t u = (uint32_t)b << 16;
    float f;
    memcpy(&f, &u, 4);
    return f;
}
static uint16_t rbf(int lo, int span) { /* a random BF16 of magnitude 2^lo .. 2^(lo + span) */
    float f = ldexpf(1.0f + (float)(rnd() % 128) / 128.0f, lo + (int)(rnd() % (uint64_t)span));
    if (rnd() & 1) f = -f;
    uint32_t u;
    memcpy(&u, &f, 4);
    return (uint16_t)(u >> 16);
}
static float round_to(double x, int mode) {
    fesetround(mode);
    volatile double v = x;
    const float f = (float)v;
    fesetround(FE_TONEAREST);
    return f;
}

static uint16_t A[16][32], B[16][32], A2[16][32], B2[16][32];
static float C[16][16], C2[16][16];

static void config(int rows) {
    static uint8_t cfg[64] __attribute__((aligned(64)));
    memset(cfg, 0, 64);
    cfg[0] = 1;
    for (int t = 0; t < 3; t++) {
        cfg[16 + 2 * t] = 64;
        cfg[48 + t] = (uint8_t)(t == 2 ? 16 : rows);
    }
    __asm__ volatile("ldtilecfg %0" ::"m"(cfg) : "memory");
}
/* C = 0 + A x B by one TDPBF16PS (tmm0 = C, tmm1 = A, tmm2 = B) */
static void tdp(const uint16_t (*a)[32], const uint16_t (*b)[32], float (*c)[16]) {
    __asm__ volatile("tilezero %%tmm0\n\t"
                     "tileloadd (%0,%3,1), %%tmm1\n\t"
                     "tileloadd (%1,%3,1), %%tmm2\n\t"
                     "tdpbf16ps %%tmm2, %%tmm1, %%tmm0\n\t"
                     "tilestored %%tmm0, (%2,%3,1)"
                     :
                     : "r"(a), "r"(b), "r"(c), "r"(64L)
                     : "memory");
}

int main(void) {
    if (syscall(SYS_arch_prctl, 0x1023 /* ARCH_REQ_XCOMP_PERM */, 18 /* XTILEDATA */)) {
        puts("no AMX tile data permission (not an AMX CPU, or not Linux)");
        return 1;
    }
    static const int modes[2] = {FE_TONEAREST, FE_TOWARDZERO};
    static const int npairs[] = {1, 2, 4, 16}, spans[] = {8, 20};
    config(16);
    printf("lanes equal to each statement (of 256,000 per line)\n");
    printf("pairs span | even-first odd-first | pair-exact tree exact-total | pair-exact toward zero\n");
    for (size_t pi = 0; pi < 4; pi++)
        for (size_t si = 0; si < 2; si++) {
            const int np = npairs[pi], span = spans[si];
            long even = 0, odd = 0, cnt[2][3] = {{0}};
            for (int it = 0; it < 1000; it++) {
                memset(A, 0, sizeof A);
                memset(B, 0, sizeof B);
                for (int i = 0; i < 16; i++)
                    for (int j = 0; j < 2 * np; j++) A[i][j] = rbf(-10, span);
                for (int k = 0; k < np; k++)
                    for (int j = 0; j < 32; j++) B[k][j] = rbf(-10, span);
                tdp(A, B, C);
                for (int m = 0; m < 16; m++)
                    for (int n = 0; n < 16; n++) {
                        double p[32];
                        for (int k = 0; k < np; k++) {
                            p[2 * k] = (double)b2f(A[m][2 * k]) * b2f(B[k][2 * n]);
                            p[2 * k + 1] = (double)b2f(A[m][2 * k + 1]) * b2f(B[k][2 * n + 1]);
                        }
                        float e = 0.0f, o = 0.0f; /* products of two BF16 are exact in F32 */
                        for (int k = 0; k < np; k++) {
                            e = e + (float)p[2 * k];
                            e = e + (float)p[2 * k + 1];
                            o = o + (float)p[2 * k + 1];
                            o = o + (float)p[2 * k];
                        }
                        even += !memcmp(&e, &C[m][n], 4);
                        odd += !memcmp(&o, &C[m][n], 4);
                        for (int md = 0; md < 2; md++) {
                            float a = 0.0f, t[16];
                            double x = 0.0;
                            for (int k = 0; k < np; k++) {
                                a = round_to((double)a + p[2 * k] + p[2 * k + 1], modes[md]);
                                t[k] = round_to(p[2 * k] + p[2 * k + 1], modes[md]);
                                x += p[2 * k] + p[2 * k + 1];
                            }
                            for (int w = np; w > 1;) { /* pairwise, an odd last one carried up */
                                const int h = w / 2;
                                for (int i = 0; i < h; i++) t[i] = round_to((double)t[2 * i] + t[2 * i + 1], modes[md]);
                                if (w & 1) t[h] = t[w - 1];
                                w = h + (w & 1);
                            }
                            const float xf = round_to(x, modes[md]);
                            cnt[md][0] += !memcmp(&a, &C[m][n], 4);
                            cnt[md][1] += !memcmp(&t[0], &C[m][n], 4);
                            cnt[md][2] += !memcmp(&xf, &C[m][n], 4);
                        }
                    }
            }
            printf("%5d %4d | %10ld %9ld | %10ld %6ld %11ld | %10ld\n", np, span, even, odd, cnt[0][0], cnt[0][1], cnt[0][2], cnt[1][0]);
        }
    /* invariance: a row of A moved (fewer rows configured), a column of B moved */
    long row_bad = 0, col_bad = 0;
    for (int it = 0; it < 20000; it++) {
        for (int i = 0; i < 16; i++)
            for (int j = 0; j < 32; j++) A[i][j] = rbf(-30, 50), B[i][j] = rbf(-30, 50), A2[i][j] = rbf(-30, 50), B2[i][j] = rbf(-30, 50);
        const int rows = 1 + (int)(rnd() % 16), r = (int)(rnd() % 16), r2 = (int)(rnd() % (uint64_t)rows);
        const int c = (int)(rnd() % 16), c2 = (int)(rnd() % 16);
        memcpy(A2[r2], A[r], 64);
        for (int k = 0; k < 16; k++) B2[k][2 * c2] = B[k][2 * c], B2[k][2 * c2 + 1] = B[k][2 * c + 1];
        config(16);
        tdp(A, B, C);
        config(rows);
        tdp(A2, B, C2);
        row_bad += memcmp(C[r], C2[r2], 64) != 0;
        config(16);
        tdp(A, B2, C2);
        for (int m = 0; m < 16; m++) col_bad += memcmp(&C[m][c], &C2[m][c2], 4) != 0;
    }
    __asm__ volatile("tilerelease" ::: "memory");
    printf("a row moved (other rows random, 1-16 rows configured): %ld of 20000 rows differ\n", row_bad);
    printf("a column moved (other columns random): %ld of 320000 lanes differ\n", col_bad);
    return 0;
}
