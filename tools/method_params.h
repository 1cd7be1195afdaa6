/* method_params.h - part of the tools API for the commands (see tools/tools.h): the --param
 * KEY=VALUE options of `sdnpu bench` and `sdnpu study`, applied to a drafting-method
 * configuration as they are parsed (the configuration is what datasets/bench.h and
 * datasets/study.h take as mcfg). */
#ifndef SDN_TOOLS_METHOD_PARAMS_H
#define SDN_TOOLS_METHOD_PARAMS_H

#include <stddef.h>

#include "draft/methods.h"

/* The --param values: each one applied to cfg as it is parsed (a bad key or value is a usage
 * error), the first 64 kept for the records; given: 1 once any was. */
typedef struct sdn_tool_params {
    sdn_method_config cfg;
    const char *v[64];
    int n, given;
} sdn_tool_params;
/* Defaults, no values. */
void sdn_tool_params_init(sdn_tool_params *p);
/* cli_opt.fn of --param (dest: an sdn_tool_params): 0, or -1 with the reason in why. */
int sdn_tool_param_fn(void *dest, const char *value, char *why, size_t cap);

#endif
