/* method_params.c - the --param options of bench and study (method_params.h) and the help
 * text of their keys (sdn_tool_param_help, tools.h), from the method registry
 * (draft/methods.h). */
#include <stdio.h>
#include <string.h>

#include "tools/method_params.h"
#include "tools/tools.h"

void sdn_tool_params_init(sdn_tool_params *p) {
    memset(p, 0, sizeof *p);
    sdn_method_defaults(&p->cfg);
}

int sdn_tool_param_fn(void *dest, const char *value, char *why, size_t cap) {
    sdn_tool_params *p = dest;
    sdn_err e = {0};
    if (sdn_method_set_param(&p->cfg, value, &e)) {
        snprintf(why, cap, "%s", strncmp(e.msg, "option --param: ", 16) ? e.msg : e.msg + 16);
        return -1;
    }
    if (p->n < 64) p->v[p->n++] = value;
    p->given = 1;
    return 0;
}

void sdn_tool_param_help(FILE *f) {
    const char *key;
    int is_float;
    double lo, hi, def;
    fprintf(f, "                        keys (range, default):\n");
    for (int i = 0; sdn_method_param_info(i, &key, &is_float, &lo, &hi, &def); i++)
        fprintf(f, "                          %-18s %s in [%g, %g], default %g\n", key, is_float ? "number " : "integer", lo, hi, def);
    fprintf(f, "                        reuse.rule: 0 = a reused segment ages out after reuse.max_age steps, 1 = the paper's\n"
               "                          rule (kept one step at least, dropped after a step drafting more than\n"
               "                          reuse.threshold tokens); sdnpu.weigh: 1 = with calibration the context continuation\n"
               "                          is weighed by the model's prefill predictions, 0 = not (the paper's drafter,\n"
               "                          the default: it measured better on the real tasks)\n");
}
