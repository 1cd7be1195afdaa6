/* env_settings.c - every test program starts with the settings the `sdnpu` program takes from
 * its environment: SDN_KERNEL, SDN_PREFILL_MATMUL, SDN_CACHE_TYPE_K / _V, SDN_MEM_LIMIT_MB and
 * the cache directory (SDNPU_CACHE, XDG_CACHE_HOME, HOME). libsdnpu reads no environment
 * variable, so this constructor reads them once, before main, and sets them through the
 * library's setters (tools/cli_machine.c, sdn_tool_global_options, the code the program runs):
 * CI's `SDN_KERNEL=portable|avx2|avx512 ctest -L unit` keeps forcing the path of every test.
 * Linked into every test executable as an object (CMakeLists.txt), not from the archive, so
 * the constructor is always there. An invalid value stops the test with its message (exit 2). */
#include <stdlib.h>

#include "tools/tools.h"

__attribute__((constructor)) static void tests_env_settings(void) {
    if (sdn_tool_global_options(NULL, NULL, NULL, NULL)) exit(2);
}
