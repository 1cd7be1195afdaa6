/* request.h - turning a user request (documents, a prompt) into the prompt tokens the
 * model sees: the model's chat template when it has one (or the one forced by name), or
 * plain text (documents, a blank line, the prompt) for base models such as TinyStories.
 * The one place where requests become tokens, shared by run, bench and trace. */
#ifndef SDN_REQUEST_H
#define SDN_REQUEST_H

#include <stdint.h>

#include "common/sdn_err.h"
#include "tokenizer/chat_template.h"
#include "modelfile/model.h"

typedef struct sdn_request {
    const sdn_chat_msg *messages; /* a conversation (then documents and prompt must be absent) */
    int n_messages;
    const char *const *documents; /* context documents (may be NULL when n_docs == 0) */
    int n_docs;
    const char *prompt;           /* the instruction or question */
    const char *system;           /* system prompt; NULL: the template's default */
    const char *chat_template;    /* NULL or "auto": from the model; "none": plain text;
                                     or a template name (chatml, llama3, llama2, vicuna, plain, gemma) */
    int max_tokens;               /* > 0: a request whose rendered text is certainly longer
                                     than this many tokens is refused before tokenizing */
} sdn_request;

/* Render and tokenize. A conversation is rendered with the chat template and the opening of
 * the assistant turn (raw text models: the plain "User: ...\nAssistant:" rendering). *ids is malloc'd. *text (optional) receives the rendered text.
 * With r->max_tokens > 0, a rendered text of more than sdn_request_max_bytes bytes is
 * refused (SDN_EINVAL, naming the sizes) without tokenizing it. */
int sdn_request_tokens(const sdn_model *m, const sdn_request *r, int32_t **ids, int *n_ids, char **text, sdn_err *err);
/* The largest text, in bytes, that can tokenize to at most max_tokens tokens with m's
 * tokenizer (max_tokens times the most text bytes one token stands for); SIZE_MAX when m
 * has no tokenizer or max_tokens <= 0. Readers of context files stop reading there. */
size_t sdn_request_max_bytes(const sdn_model *m, int max_tokens);

#endif
