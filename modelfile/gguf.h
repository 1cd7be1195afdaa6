/* gguf.h - GGUF model files: a validating reader over mmap and a streaming writer.
 *
 * Format facts follow the GGUF specification (github.com/ggml-org/ggml, docs/gguf.md):
 * little-endian; magic "GGUF"; uint32 version (2 and 3 supported); uint64 tensor count;
 * uint64 metadata count; metadata key/value pairs (string key, uint32 value type, value);
 * tensor infos (name, uint32 n_dims, uint64 ne[n_dims] with ne[0] the contiguous
 * dimension, uint32 ggml type, uint64 offset relative to the data section); padding to
 * `general.alignment` (default 32); the data section. Strings are uint64 length + bytes.
 *
 * The reader treats the file as untrusted: every count, length, dimension and offset is
 * bounds-checked and every failure names the file and the field at fault. */
#ifndef SDN_GGUF_H
#define SDN_GGUF_H

#include <stddef.h>
#include <stdint.h>

#include "common/sdn_err.h"

typedef enum sdn_gguf_vtype {
    SDN_GGUF_UINT8 = 0,
    SDN_GGUF_INT8 = 1,
    SDN_GGUF_UINT16 = 2,
    SDN_GGUF_INT16 = 3,
    SDN_GGUF_UINT32 = 4,
    SDN_GGUF_INT32 = 5,
    SDN_GGUF_FLOAT32 = 6,
    SDN_GGUF_BOOL = 7,
    SDN_GGUF_STRING = 8,
    SDN_GGUF_ARRAY = 9,
    SDN_GGUF_UINT64 = 10,
    SDN_GGUF_INT64 = 11,
    SDN_GGUF_FLOAT64 = 12,
} sdn_gguf_vtype;

#define SDN_GGUF_MAX_DIMS 4
#define SDN_GGUF_DEFAULT_ALIGNMENT 32 /* of the data section when `general.alignment` is absent */

/* Bytes of one value of a fixed-size metadata type: 1 (UINT8, INT8, BOOL), 2 (UINT16, INT16),
 * 4 (UINT32, INT32, FLOAT32), 8 (UINT64, INT64, FLOAT64); 0 for STRING, ARRAY and unknown ids.
 * The one table of the reader and the writer (tools/gguf_write.c). */
size_t sdn_gguf_vtype_size(uint32_t type);

typedef struct sdn_gguf_tensor {
    const char *name;           /* NUL-terminated copy */
    uint32_t n_dims;
    int64_t ne[SDN_GGUF_MAX_DIMS]; /* unused dims are 1; ne[0] is contiguous */
    uint32_t type;              /* sdn_type / ggml type id */
    uint64_t offset;            /* relative to the data section */
    const void *data;           /* into the mapping */
    size_t nbytes;
} sdn_gguf_tensor;

typedef struct sdn_gguf sdn_gguf;

/* Map and parse `path`. On failure *out is NULL and err names the file and the problem. */
int sdn_gguf_open(const char *path, sdn_gguf **out, sdn_err *err);
/* Parse an in-memory image (not copied; must outlive the handle). `name` is used in messages. */
int sdn_gguf_open_memory(const void *data, size_t size, const char *name, sdn_gguf **out, sdn_err *err);
void sdn_gguf_close(sdn_gguf *g);

const char *sdn_gguf_path(const sdn_gguf *g);
uint32_t sdn_gguf_version(const sdn_gguf *g);
size_t sdn_gguf_file_size(const sdn_gguf *g);
/* The whole mapped image (for fingerprints). */
const void *sdn_gguf_image(const sdn_gguf *g);
/* Let the system drop the pages of [p, p + n) from this process's view of a file-mapped image
 * (madvise MADV_DONTNEED on the whole pages inside the range; the file's bytes are read
 * back on the next access, nothing is lost). No effect for an image in memory
 * (sdn_gguf_open_memory) or a range outside the image. */
void sdn_gguf_drop_pages(const sdn_gguf *g, const void *p, size_t n);
/* Bytes of the header (magic .. tensor infos) = offset of the padding before the data. */
size_t sdn_gguf_header_size(const sdn_gguf *g);

/* --- metadata --- */
int sdn_gguf_n_kv(const sdn_gguf *g);
const char *sdn_gguf_kv_key(const sdn_gguf *g, int i);
sdn_gguf_vtype sdn_gguf_kv_type(const sdn_gguf *g, int i);
/* Index of `key`, or -1. */
int sdn_gguf_find(const sdn_gguf *g, const char *key);

/* Typed getters by key. They fail with SDN_EFORMAT naming the key when it is missing
 * (unless the *_or variant is used) or has an incompatible type. Integer getters accept
 * any integer type whose value fits. */
int sdn_gguf_get_u32(const sdn_gguf *g, const char *key, uint32_t *out, sdn_err *err);
int sdn_gguf_get_u32_or(const sdn_gguf *g, const char *key, uint32_t dflt, uint32_t *out, sdn_err *err);
int sdn_gguf_get_i64(const sdn_gguf *g, const char *key, int64_t *out, sdn_err *err);
int sdn_gguf_get_f32(const sdn_gguf *g, const char *key, float *out, sdn_err *err);
int sdn_gguf_get_f32_or(const sdn_gguf *g, const char *key, float dflt, float *out, sdn_err *err);
int sdn_gguf_get_bool_or(const sdn_gguf *g, const char *key, int dflt, int *out, sdn_err *err);
/* Returns the string or NULL when missing / not a string. */
const char *sdn_gguf_str_or_null(const sdn_gguf *g, const char *key);

/* Arrays: element type and count of the array at key index i (type SDN_GGUF_ARRAY). */
int sdn_gguf_arr_info(const sdn_gguf *g, int i, sdn_gguf_vtype *elem_type, uint64_t *count);
/* Raw pointer to the elements of a fixed-size-element array (little-endian in the file,
 * possibly unaligned: read with memcpy). NULL for string/nested arrays. */
const void *sdn_gguf_arr_data(const sdn_gguf *g, int i);
/* Element j of a string array: pointer into the mapping (NOT NUL-terminated) and length. */
const char *sdn_gguf_arr_str(const sdn_gguf *g, int i, uint64_t j, size_t *len);
/* Numeric element j of an integer/float/bool array converted to double. */
double sdn_gguf_arr_num(const sdn_gguf *g, int i, uint64_t j);

/* --- tensors --- */
int sdn_gguf_n_tensors(const sdn_gguf *g);
/* Tensor by name, or NULL. */
const sdn_gguf_tensor *sdn_gguf_tensor_find(const sdn_gguf *g, const char *name);

/* ------------------------------------------------------------------------------------
 * Writer: collect metadata and tensor infos, then stream the file in one pass. Tensor
 * data is produced by a callback in tensor order, so multi-GB files need no buffer. */
typedef struct sdn_gguf_writer sdn_gguf_writer;

sdn_gguf_writer *sdn_gguf_writer_new(void);
void sdn_gguf_writer_free(sdn_gguf_writer *w);
/* Scalars and strings (keys must be unique; a second set of the same key replaces it). */
int sdn_gguf_w_u32(sdn_gguf_writer *w, const char *key, uint32_t v);
int sdn_gguf_w_i32(sdn_gguf_writer *w, const char *key, int32_t v);
int sdn_gguf_w_u64(sdn_gguf_writer *w, const char *key, uint64_t v);
int sdn_gguf_w_f32(sdn_gguf_writer *w, const char *key, float v);
int sdn_gguf_w_bool(sdn_gguf_writer *w, const char *key, int v);
int sdn_gguf_w_str(sdn_gguf_writer *w, const char *key, const char *v);
/* Arrays: elements are copied. For strings, lens may be NULL (NUL-terminated). */
int sdn_gguf_w_arr_str(sdn_gguf_writer *w, const char *key, const char *const *v, const size_t *lens, uint64_t n);
int sdn_gguf_w_arr_f32(sdn_gguf_writer *w, const char *key, const float *v, uint64_t n);
int sdn_gguf_w_arr_i32(sdn_gguf_writer *w, const char *key, const int32_t *v, uint64_t n);
/* Copy key index i of an open file (any type, arrays included) into the writer. */
int sdn_gguf_w_copy_kv(sdn_gguf_writer *w, const sdn_gguf *src, int i);
/* Declare a tensor (dims with ne[0] contiguous). Returns its index or -1. */
int sdn_gguf_w_tensor(sdn_gguf_writer *w, const char *name, uint32_t type, int n_dims, const int64_t *ne);

/* Fill `dst` (nbytes) with the data of tensor `index`. Return SDN_OK or an error. */
typedef int (*sdn_gguf_fill_fn)(void *ctx, int index, const char *name, void *dst, size_t nbytes, sdn_err *err);
/* Write the file (version 3, alignment 32) to `path` atomically (temp file + rename). */
int sdn_gguf_writer_write(sdn_gguf_writer *w, const char *path, sdn_gguf_fill_fn fill, void *ctx, sdn_err *err);

#endif
