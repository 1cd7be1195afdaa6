/* ds_cli.h - helpers shared by the dataset commands (trace, trace-import, study, bench,
 * make-story-task): where ../shared is, comma-separated lists, the method list from the
 * registry, and the progress-bar callback. */
#ifndef SDN_DS_CLI_H
#define SDN_DS_CLI_H

#include <stddef.h>

#include "draft/methods.h"
#include "tools/progress.h"

/* The --param values of study and bench: each one applied to cfg as it is parsed (a bad key
 * or value is a usage error), the first 64 kept for the records. */
typedef struct dscli_params {
    sdn_method_config cfg;
    const char *v[64];
    int n, given;
} dscli_params;
void dscli_params_init(dscli_params *p);
/* cli_opt.fn of --param (dest: a dscli_params). */
int dscli_param_fn(void *dest, const char *value, char *why, size_t cap);

/* The shared material directory: $SDN_SHARED, else ../shared beside the source tree the
 * program was built in (BUILD/sdnpu with BUILD/../CMakeLists.txt); NULL when absent. Nothing
 * further up is tried: it could find an unrelated folder. */
const char *dscli_shared(void);
/* Split "a,b, c" into a NULL-terminated malloc'd array of malloc'd strings; *n items. */
char **dscli_split(const char *csv, int *n);
void dscli_free_list(char **l);
/* Every registered drafting method except "none" (from sdn_method_list()). */
char **dscli_all_methods(int *n);
/* sdn_bench_opts.progress adapter: ud is an sdn_progress. */
void dscli_progress(void *ud, long done, long total, const char *note);

#endif
