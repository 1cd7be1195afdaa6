/* cli.h - shared declarations of the thin `sdnpu` command-line program: one function per
 * subcommand (cmd_*.c), and small option-parsing helpers that name the option at fault. */
#ifndef SDN_CLI_H
#define SDN_CLI_H

#include <stdint.h>

typedef int (*sdn_cmd_fn)(int argc, char **argv);

/* Subcommands (argv[0] is the subcommand name). Each returns the process exit code. */
int cmd_run(int argc, char **argv);
int cmd_chat(int argc, char **argv);
int cmd_info(int argc, char **argv);
int cmd_pull(int argc, char **argv);
int cmd_make_model(int argc, char **argv);
int cmd_demo(int argc, char **argv);
int cmd_bench_model(int argc, char **argv);
int cmd_bench_sam(int argc, char **argv);
int cmd_bench_verify(int argc, char **argv);
int cmd_tokenize(int argc, char **argv);
int cmd_bench_kernels(int argc, char **argv);
int cmd_bench_attention(int argc, char **argv);
int cmd_profile(int argc, char **argv);
int cmd_bench_graphs(int argc, char **argv);
int cmd_trace(int argc, char **argv);
int cmd_trace_import(int argc, char **argv);
int cmd_study(int argc, char **argv);
int cmd_bench(int argc, char **argv);
int cmd_make_story_task(int argc, char **argv);
int cmd_serve(int argc, char **argv);

/* Options: cli/opts.h (the one option table of every command). */

#endif
