/* insn_count.c - a QEMU TCG plugin that counts the guest instructions a program executes
 * (docs/results.md, "AArch64 under emulation": instruction counts per token of each path under
 * qemu-aarch64; counts, not time). Debian 12's qemu-user supports -plugin but ships neither
 * the example plugins nor qemu-plugin.h, so the few declarations of QEMU's plugin interface
 * (version 1, QEMU 7.2) it uses are written out here.
 *
 *   cc -shared -fPIC -O2 -o insn_count.so scripts/qemu/insn_count.c
 *   qemu-aarch64 -L / -cpu max -plugin ./insn_count.so -d plugin PROGRAM ARGS...
 *
 * prints "insns N" on exit (to qemu's log: stderr with -d plugin). Every instruction of every
 * executed translation block is counted (an inline add per block, no per-instruction
 * callback); threads share one counter, so counts with several threads may lose a few
 * increments (run with 1 thread). */
#include <inttypes.h>
#include <stdint.h>
#include <stdio.h>

typedef uint64_t qemu_plugin_id_t;
struct qemu_plugin_tb;
typedef struct qemu_info_t qemu_info_t;
enum qemu_plugin_op { QEMU_PLUGIN_INLINE_ADD_U64 = 0 };
typedef void (*tb_trans_cb_t)(qemu_plugin_id_t id, struct qemu_plugin_tb *tb);
typedef void (*atexit_cb_t)(qemu_plugin_id_t id, void *userdata);

void qemu_plugin_register_vcpu_tb_trans_cb(qemu_plugin_id_t id, tb_trans_cb_t cb);
size_t qemu_plugin_tb_n_insns(const struct qemu_plugin_tb *tb);
void qemu_plugin_register_vcpu_tb_exec_inline(struct qemu_plugin_tb *tb, enum qemu_plugin_op op, void *ptr, uint64_t imm);
void qemu_plugin_register_atexit_cb(qemu_plugin_id_t id, atexit_cb_t cb, void *userdata);
void qemu_plugin_outs(const char *string);

__attribute__((visibility("default"))) int qemu_plugin_version = 1;

static uint64_t insns;

static void on_trans(qemu_plugin_id_t id, struct qemu_plugin_tb *tb) {
    (void)id;
    qemu_plugin_register_vcpu_tb_exec_inline(tb, QEMU_PLUGIN_INLINE_ADD_U64, &insns, qemu_plugin_tb_n_insns(tb));
}

static void on_exit_cb(qemu_plugin_id_t id, void *p) {
    (void)id;
    (void)p;
    char buf[64];
    snprintf(buf, sizeof buf, "insns %" PRIu64 "\n", insns);
    qemu_plugin_outs(buf);
}

__attribute__((visibility("default"))) int qemu_plugin_install(qemu_plugin_id_t id, const qemu_info_t *info, int argc,
                                                                char **argv) {
    (void)info;
    (void)argc;
    (void)argv;
    qemu_plugin_register_vcpu_tb_trans_cb(id, on_trans);
    qemu_plugin_register_atexit_cb(id, on_exit_cb, NULL);
    return 0;
}
