/* dataset.h - task datasets: the requests the benchmark, `sdnpu trace` and the studies run.
 *
 * Two input formats, recognised per file from the first row:
 *   - sdnpu task rows (the files under ../shared/datasets/, one folder per task): one JSON object per line with
 *     "id", "task", "context", "prompt" (strings, required), "reference" (optional: a
 *     string, or any JSON value, kept as its compact JSON text), "group" (optional task
 *     group for the history store; default: the task), "input" (optional: the original
 *     full model input, used when a chat template renders the request the way the source
 *     benchmark did). Other fields ("source", "meta", ...) are ignored.
 *   - Spec-Bench question.jsonl: "question_id" (integer), "category" (string), "turns"
 *     (array of strings, the first one is used). id = "specbench-<question_id>"; category
 *     "summarization" becomes task "summary" with the document after "Summarize: " as
 *     context; "rag" becomes task "rag" with the passages (text before the last newline) as
 *     context and the question (last line) as prompt; any other category keeps its name
 *     with an empty context and the turn as prompt. input = the turn, byte for byte.
 * Model answer files (Spec-Bench model_answer rows, or the flattened rows of
 * ../shared/datasets/model_outputs/) are read by sdn_answers_load.
 *
 * Every row is checked; the first problem fails with SDN_EFORMAT and a message naming the
 * file, the line and the field ("rag.jsonl:7: field 'context': expected a string").
 * Duplicate ids within one dataset are refused too. */
#ifndef SDN_DATASET_H
#define SDN_DATASET_H

#include "common/sdn_err.h"

typedef struct sdn_task_row {
    char *id, *task, *group; /* group: never NULL (defaults to the task) */
    char *context, *prompt;  /* never NULL ("" allowed for context) */
    char *reference;         /* NULL when absent / null */
    char *input;             /* NULL when absent / null */
    char *file;              /* the file the row came from */
    int line;                /* its line number there */
} sdn_task_row;

typedef struct sdn_dataset {
    int n, cap;
    sdn_task_row *rows;
} sdn_dataset;

/* Append the rows of one JSONL file (either format) to `ds` (zero-initialize it first). On
 * error `ds` keeps the rows read before the failing file. */
int sdn_dataset_load_file(sdn_dataset *ds, const char *path, sdn_err *err);
/* Same for an in-memory buffer; `name` is used in messages and as the row's file. */
int sdn_dataset_load_buf(sdn_dataset *ds, const char *name, const char *data, size_t len, sdn_err *err);
/* Load a file, or a directory: every *.jsonl in it and in its direct subdirectories
 * (sorted by path), except a subdirectory named "model_outputs" (answers, not tasks). */
int sdn_dataset_load(sdn_dataset *ds, const char *path, sdn_err *err);
void sdn_dataset_free(sdn_dataset *ds);

/* Keep only rows whose task is in the comma-separated list `tasks` (NULL or "" keeps all)
 * and at most `limit` rows per task (limit <= 0: no limit), in file order. */
void sdn_dataset_filter(sdn_dataset *ds, const char *tasks, int limit);
/* Index of the row with this id, or -1. */
int sdn_dataset_find(const sdn_dataset *ds, const char *id);
/* Distinct tasks in first-appearance order: writes up to max pointers into names (owned by
 * the dataset) and returns the number of distinct tasks. */
int sdn_dataset_tasks(const sdn_dataset *ds, const char **names, int max);

/* A model's recorded answer to a dataset row. */
typedef struct sdn_answer_row {
    char *id;        /* "specbench-<question_id>" when the file has only question_id */
    char *task;      /* NULL when the file does not say */
    char *model;     /* model_id, NULL when absent */
    char *output;    /* the answer text */
    long new_tokens; /* tokens the model reported generating (-1 unknown) */
    int line;
} sdn_answer_row;

typedef struct sdn_answers {
    int n, cap;
    sdn_answer_row *rows;
} sdn_answers;

/* Read an answer file: per line either {"id"|"question_id", "output": string,
 * "new_tokens"?: integer, "model_id"?: string, "task"?: string} (model_outputs/) or
 * Spec-Bench's {"question_id", "model_id", "choices": [{"turns": [string, ...],
 * "new_tokens": [integer, ...]}]} (first turn of the first choice). */
int sdn_answers_load(sdn_answers *a, const char *path, sdn_err *err);
void sdn_answers_free(sdn_answers *a);
int sdn_answers_find(const sdn_answers *a, const char *id);
/* Answers taken from the rows' own "reference" fields (rows without one are skipped), for
 * datasets whose references are recorded outputs of a model (AndroidArena: GPT-4's
 * responses) or of people (ConvAI2 replies); `model` names who wrote them. */
int sdn_answers_from_references(const sdn_dataset *ds, const char *model, sdn_answers *a, sdn_err *err);

#endif
