/* prefix_disk.h - the prefix cache's disk tier (prefix_cache.h, "Disk tier"): block files under
 * an SQLite index with a byte budget. Used by prefix_cache.c only. Every function takes a NULL
 * tier (none) and does nothing then; after a write failure the tier is off (sdn_pdisk_on 0). */
#ifndef SDN_PREFIX_DISK_H
#define SDN_PREFIX_DISK_H

#include <stddef.h>
#include <stdint.h>

#include "runtime/prefix_cache.h"

typedef struct sdn_pdisk sdn_pdisk;

/* The tier in directory dir (made 0700 when absent), or NULL after one warning saying why the
 * cache goes on in memory only. Removes what killed writers left (temporary files, files
 * the index does not know) once they are old enough not to be another process's write. */
sdn_pdisk *sdn_pdisk_open(const char *dir, uint64_t budget);
void sdn_pdisk_close(sdn_pdisk *d);
int sdn_pdisk_on(const sdn_pdisk *d);
/* The image of block key (malloc'd, bytes long) and its cost, or NULL: absent, or damaged,
 * truncated or another block's (then reported once, and the file deleted). */
uint8_t *sdn_pdisk_load(sdn_pdisk *d, sdn_pkey key, const int32_t *tokens, size_t bytes, double *cost);
/* Write a block (making room in the budget first); 1 when it was written. */
int sdn_pdisk_store(sdn_pdisk *d, sdn_pkey key, const int32_t *tokens, const uint8_t *img, size_t bytes, double cost);
void sdn_pdisk_stats(sdn_pdisk *d, uint64_t *bytes, uint64_t *budget, long *damaged, long *evictions);

#endif
