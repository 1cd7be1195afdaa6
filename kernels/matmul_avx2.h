/* matmul_avx2.h - inline helpers shared by the AVX2 kernels (engine/matmul_*_avx2.c).
 * Internal; include only under SDN_MATMUL_AVX2.
 *
 * The integer dot product of 32 unsigned bytes with 32 signed bytes uses VNNI (vpdpbusd)
 * when the build has it and vpmaddubsw + vpmaddwd otherwise. Both are exact for the operand
 * ranges the kernels feed them (without VNNI u8 <= 128 and |s8| <= 127, so a vpmaddubsw pair
 * sum is at most 32512, below its int16 saturation), so every variant computes the same
 * integers and therefore the same floats. */
#ifndef SDN_MATMUL_AVX2_H
#define SDN_MATMUL_AVX2_H

#include <immintrin.h>
#include <stdint.h>
#include <string.h>

#define SDN_INLINE static inline __attribute__((always_inline))
/* Fully unroll the small loops over a tile's rows (trip counts are compile-time constants
 * after inlining) so that accumulators live in registers. */
#if defined(__clang__)
#define SDN_UNROLL _Pragma("unroll")
#else
#define SDN_UNROLL _Pragma("GCC unroll 16")
#endif

/* Software prefetch: while a tile reads position p of its weight rows, it prefetches position
 * p of the rows SDN_PF_TILES tiles further on. The hardware prefetchers alone leave decode
 * (n = 1) short of memory bandwidth when a kernel spends several cycles per cache line.
 * Prefetches past the end of the matrix are harmless (they never fault). */
#ifndef SDN_PF_TILES
#define SDN_PF_TILES 1
#endif
#ifndef SDN_PF_HINT
#define SDN_PF_HINT _MM_HINT_T1
#endif
SDN_INLINE void sdn_prefetch(const void *p) { _mm_prefetch((const char *)p, SDN_PF_HINT); }

/* Horizontal sum of 8 floats, always in this order: (lo128 + hi128), then pairs, then lanes. */
SDN_INLINE float sdn_hsum8(__m256 v) {
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_shuffle_ps(s, s, 1));
    return _mm_cvtss_f32(s);
}

#if (defined(__AVX512VNNI__) && defined(__AVX512VL__)) || defined(__AVXVNNI__)
#define SDN_VNNI 1
#endif

/* acc + 8 int32 lanes, lane k = sum of u[4k..4k+3] * s[4k..4k+3] (u unsigned, s signed).
 * Without VNNI, u must stay <= 128 (the vpmaddubsw pair sum must not saturate). */
SDN_INLINE __m256i sdn_dpbusd(__m256i acc, __m256i u, __m256i s) {
#if defined(__AVX512VNNI__) && defined(__AVX512VL__)
    return _mm256_dpbusd_epi32(acc, u, s);
#elif defined(__AVXVNNI__)
    return _mm256_dpbusd_avx_epi32(acc, u, s);
#else
    return _mm256_add_epi32(acc, _mm256_madd_epi16(_mm256_maddubs_epi16(u, s), _mm256_set1_epi16(1)));
#endif
}
SDN_INLINE __m256i sdn_dot_u8s8(__m256i u, __m256i s) { return sdn_dpbusd(_mm256_setzero_si256(), u, s); }

/* Byte j = 0xFF if bit j of x is set, else 0. */
SDN_INLINE __m256i sdn_bits_to_bytes(uint32_t x) {
    const __m256i shuf = _mm256_setr_epi64x(0x0000000000000000LL, 0x0101010101010101LL, 0x0202020202020202LL,
                                            0x0303030303030303LL);
    const __m256i bit = _mm256_set1_epi64x((long long)0x8040201008040201ULL);
    __m256i v = _mm256_shuffle_epi8(_mm256_set1_epi32((int)x), shuf);
    return _mm256_cmpeq_epi8(_mm256_and_si256(v, bit), bit);
}

/* 16 bytes of packed nibbles -> 32 bytes: low nibbles then high nibbles (the Q4/Q5 order).
 * One 128-bit broadcast load, a per-half variable shift, a mask. */
SDN_INLINE __m256i sdn_nibbles32(const uint8_t *p) {
    __m256i v = _mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i *)p));
    v = _mm256_srlv_epi32(v, _mm256_setr_epi32(0, 0, 0, 0, 4, 4, 4, 4));
    return _mm256_and_si256(v, _mm256_set1_epi8(15));
}

SDN_INLINE float sdn_h2f(const void *p) {
    uint16_t h;
    memcpy(&h, p, 2);
    return _cvtsh_ss(h);
}

/* sdn_f16_table (matmul_internal.h): a block scale costs two loads (index, broadcast) instead
 * of a vcvtph2ps plus a broadcast on the vector ports the dot products need. */
SDN_INLINE __m256 sdn_h2f_bcast(const void *p) {
    uint16_t h;
    memcpy(&h, p, 2);
    return _mm256_broadcast_ss(&sdn_f16_table[h]);
}

SDN_INLINE uint16_t sdn_le16(const void *p) {
    uint16_t v;
    memcpy(&v, p, 2);
    return v;
}

SDN_INLINE uint32_t sdn_le32(const void *p) {
    uint32_t v;
    memcpy(&v, p, 4);
    return v;
}

#endif
