/* layout.h - the two weight layouts of a block of layers (the design's graph weights):
 *   G1 (SDN_LAYOUT_F32): every matrix dequantized to F32, what the prefill graph's SGEMMs
 *      read; 4 bytes per weight.
 *   G2 (SDN_LAYOUT_QUANT): an owned, aligned copy of the file's quantized rows, what the
 *      decode graph's batch-invariant kernels read: Q8_0 / Q4_0 / Q4_1 matrices packed into
 *      the column kernels' layout (matmul.h, "Packed weights"; the same bytes rearranged,
 *      the same results), other types copied as they are.
 * Loading materializes the layout (real time: dequantization or copying out of the file
 * mapping; real memory), unloading frees it. Loads of different layers may run on another
 * thread while the forward pass computes other layers; a layer must not be unloaded while
 * a forward pass uses it. Without a loaded layout the forward pass falls back to the file
 * mapping (dequantizing per call for SGEMM). Layout memory is 2 MiB-aligned, advised for
 * transparent huge pages, and may be recycled through a reserve (below). */
#ifndef SDN_LAYOUT_H
#define SDN_LAYOUT_H

#include <stddef.h>

#include "common/sdn_err.h"
#include "modelfile/model.h"

typedef enum sdn_layout { SDN_LAYOUT_F32 = 0, SDN_LAYOUT_QUANT = 1 } sdn_layout;

/* Load layout `which` for layers [l0, l1); *bytes (optional) gets the bytes allocated. */
int sdn_layout_load(sdn_model *m, int l0, int l1, sdn_layout which, size_t *bytes, sdn_err *err);
/* Free layout `which` of layers [l0, l1). */
void sdn_layout_unload(sdn_model *m, int l0, int l1, sdn_layout which);
/* Resident bytes of layout `which` over layers [l0, l1) (0 for parts not loaded). */
size_t sdn_layout_resident(const sdn_model *m, int l0, int l1, sdn_layout which);
/* Bytes layout `which` of layers [l0, l1) allocates (each matrix rounded up to 2 MiB). */
size_t sdn_layout_alloc_size(const sdn_model *m, int l0, int l1, sdn_layout which);
/* Bytes layout `which` of layers [l0, l1) takes when loaded. */
size_t sdn_layout_size(const sdn_model *m, int l0, int l1, sdn_layout which);
/* 1 when every matrix of layer l has layout `which` loaded. */
int sdn_layout_is_loaded(const sdn_model *m, int l, sdn_layout which);

/* The decode layout of the whole model, what an inference context reads by default
 * (forward.h, sdn_ctx_params.file_layout): G2 of every layer that has a matrix with a packed
 * form (layers without one are read from the file mapping, as fast), and the output matrix
 * packed (m->output.q) when its type has a packed form. Idempotent and thread-safe among its
 * callers; *bytes (optional) gets the bytes it allocated now. Freed with the model. */
int sdn_layout_decode_resident(sdn_model *m, size_t *bytes, sdn_err *err);
/* 1 if layer l has a matrix with a packed form (its decode layout is made resident). */
int sdn_layout_layer_packed(const sdn_model *m, int l);
/* Bytes of the packed output matrix (0 when its type has no packed form). */
size_t sdn_layout_output_size(const sdn_model *m);

/* The reserve: layout memory freed by unloads is kept, up to `bytes` (rounded down to 2 MiB),
 * and reused by later loads (best fit, in 2 MiB units) before fresh memory is mapped, so a
 * load into it is a copy into memory that is already faulted in. 0 (the default): freed
 * memory goes back to the system at once. Lowering the size releases the excess now; fill:
 * map and fault in fresh memory until the reserve holds `bytes`. Thread-safe with loads and
 * unloads of other layers. */
int sdn_layout_set_reserve(sdn_model *m, size_t bytes, int fill, sdn_err *err);
/* Bytes held free in the reserve now (resident, not part of any layout). */
size_t sdn_layout_reserve_bytes(sdn_model *m);
/* Unload every layout and release the reserve (called by sdn_model_free). */
void sdn_layout_release(sdn_model *m);

#endif
