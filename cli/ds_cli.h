/* ds_cli.h - helpers shared by the dataset commands (trace, trace-import, study, bench,
 * make-story-task): where ../shared is, comma-separated lists, and the method list of the
 * public API (--param: tools/method_params.h). */
#ifndef SDN_DS_CLI_H
#define SDN_DS_CLI_H

#include <stddef.h>

/* The shared material directory: $SDN_SHARED, else ../shared beside the source tree the
 * program was built in (BUILD/sdnpu with BUILD/../CMakeLists.txt); NULL when absent. Nothing
 * further up is tried: it could find an unrelated folder. */
const char *dscli_shared(void);
/* Split "a,b, c" into a NULL-terminated malloc'd array of malloc'd strings; *n items. */
char **dscli_split(const char *csv, int *n);
void dscli_free_list(char **l);
/* Every registered drafting method except "none" (from sdnpu_methods()). */
char **dscli_all_methods(int *n);

#endif
