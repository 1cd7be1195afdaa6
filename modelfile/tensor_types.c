/* tensor_types.c - block geometry of the GGUF tensor types (see tensor_types.h). Block
 * byte counts follow the block structs of ggml-common.h: Q4_0 = fp16 d + 16 nibble bytes,
 * Q4_1 = d, m + 16, Q5_0 = d + 4 high-bit bytes + 16, Q5_1 = d, m + 4 + 16, Q8_0 = d + 32,
 * Q8_1 = d, s + 32, Q4_K = d, dmin + 12 scale bytes + 128, Q5_K = d, dmin + 12 + 32 + 128,
 * Q6_K = 128 low + 64 high + 16 scales + d, Q8_K = f32 d + 256 + 16 int16 block sums. */
#include "modelfile/tensor_types.h"

#include <strings.h>

static const struct {
    uint32_t id;
    const char *name;
    int elems;
    size_t bytes;
    int weight;
} types[] = {
    {SDN_TYPE_F32, "F32", 1, 4, 1},
    {SDN_TYPE_F16, "F16", 1, 2, 1},
    {SDN_TYPE_BF16, "BF16", 1, 2, 1},
    {SDN_TYPE_Q4_0, "Q4_0", 32, 18, 1},
    {SDN_TYPE_Q4_1, "Q4_1", 32, 20, 1},
    {SDN_TYPE_Q5_0, "Q5_0", 32, 22, 1},
    {SDN_TYPE_Q5_1, "Q5_1", 32, 24, 1},
    {SDN_TYPE_Q8_0, "Q8_0", 32, 34, 1},
    {SDN_TYPE_Q8_1, "Q8_1", 32, 36, 0},
    {SDN_TYPE_Q4_K, "Q4_K", 256, 144, 1},
    {SDN_TYPE_Q5_K, "Q5_K", 256, 176, 1},
    {SDN_TYPE_Q6_K, "Q6_K", 256, 210, 1},
    {SDN_TYPE_Q8_K, "Q8_K", 256, 292, 0},
};
#define NTYPES (sizeof types / sizeof types[0])

static int find(uint32_t id) {
    for (size_t i = 0; i < NTYPES; i++)
        if (types[i].id == id) return (int)i;
    return -1;
}
int sdn_type_block_elems(uint32_t type) { int i = find(type); return i < 0 ? 0 : types[i].elems; }
size_t sdn_type_block_bytes(uint32_t type) { int i = find(type); return i < 0 ? 0 : types[i].bytes; }
const char *sdn_type_name(uint32_t type) { int i = find(type); return i < 0 ? NULL : types[i].name; }
int sdn_type_is_weight_type(uint32_t type) { int i = find(type); return i >= 0 && types[i].weight; }
int sdn_type_from_name(const char *name) {
    for (size_t i = 0; i < NTYPES; i++)
        if (!strcasecmp(name, types[i].name)) return (int)types[i].id;
    return -1;
}
size_t sdn_type_row_bytes(uint32_t type, int64_t n) {
    int i = find(type);
    if (i < 0 || n < 0 || n % types[i].elems) return 0;
    return (size_t)(n / types[i].elems) * types[i].bytes;
}
