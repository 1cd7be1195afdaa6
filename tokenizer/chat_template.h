/* chat_template.h - chat templates: turning a conversation, or a request made of documents
 * and a question, into the exact prompt text a chat model was trained on.
 *
 * sdnpu does not run Jinja. The model file's `tokenizer.chat_template` is recognised by
 * the markers it contains (<|im_start|>, <|start_header_id|>, [INST], "USER: ", <start_of_turn>) and rendered
 * by a fixed C implementation of that family; facts the template adds on its own (Qwen's
 * default system prompt, Llama 3.1's dated system header) are picked up from the template
 * source. Exact renderings are written out in docs/tokenizer.md.
 *
 * The rendered text contains control tokens as text (<|im_start|>, <s>, ...); tokenize it with
 * sdn_chat_tokenize (parse_special = 1, and no second BOS when the text starts with one). */
#ifndef SDN_CHAT_TEMPLATE_H
#define SDN_CHAT_TEMPLATE_H

#include <stdint.h>

#include "common/sdn_err.h"
#include "tokenizer/tokenizer.h"

typedef enum sdn_chat_kind {
    SDN_CHAT_AUTO = 0, /* detect from the model's template (plain when it has none) */
    SDN_CHAT_CHATML,   /* <|im_start|>role\ncontent<|im_end|>\n (Qwen2/2.5, SmolLM2, ...) */
    SDN_CHAT_LLAMA3,   /* <|start_header_id|>role<|end_header_id|>\n\ncontent<|eot_id|> */
    SDN_CHAT_LLAMA2,   /* <s>[INST] <<SYS>>\n...\n<</SYS>>\n\nuser [/INST] answer </s> */
    SDN_CHAT_VICUNA,   /* Vicuna v1.1: "SYSTEM USER: ... ASSISTANT: ...</s>" */
    SDN_CHAT_PLAIN,    /* no special tokens: "User: ...\nAssistant: ..." */
    SDN_CHAT_GEMMA,    /* <bos><start_of_turn>user\ncontent<end_of_turn>\n<start_of_turn>model\n (Gemma 2/3) */
} sdn_chat_kind;

typedef struct sdn_chat_msg {
    const char *role;    /* "system", "user", "assistant" (ChatML / Llama 3 accept any role) */
    const char *content;
} sdn_chat_msg;

/* A template family plus what the model's own template adds by itself. */
typedef struct sdn_chat_template {
    sdn_chat_kind kind;            /* never SDN_CHAT_AUTO after sdn_chat_template_init */
    char default_system[1024];     /* system prompt used when none is given; "" = no system turn */
    int llama3_dated;              /* Llama 3.1+: a system turn "Cutting Knowledge Date: ..." is always present */
} sdn_chat_template;

/* Family of a Jinja template source, or of a template name (NULL or unrecognised ->
 * SDN_CHAT_PLAIN). */
sdn_chat_kind sdn_chat_detect(const char *tmpl);
/* Parse a --chat-template NAME: auto, chatml, llama3, llama2, vicuna, plain, gemma.
 * SDN_OK, or SDN_EINVAL for an unknown name. */
int sdn_chat_kind_from_name(const char *name, sdn_chat_kind *out);
const char *sdn_chat_kind_name(sdn_chat_kind kind);
/* 1 if the family writes the BOS token into the text itself (Llama 3, Llama 2, Gemma): tokenize
 * such text without adding another BOS. */
int sdn_chat_writes_bos(sdn_chat_kind kind);

/* Render a conversation with the family's own defaults: CHATML is Qwen2.5's template (its
 * default system prompt "You are Qwen, created by Alibaba Cloud. You are a helpful
 * assistant." when none is given), LLAMA3 is Llama 3.1/3.2's (dated system turn always
 * present), LLAMA2 is Meta's Llama-2-chat template, VICUNA is FastChat's vicuna_v1.1, PLAIN
 * is "User: ...\nAssistant: ..." without special tokens, GEMMA is Gemma 3's template (a
 * system message becomes a prefix "<system>\n\n" of the first user turn, the assistant's role
 * is "model", content trimmed, user and assistant alternate); AUTO renders as PLAIN.
 * add_generation_prompt appends the opening of the assistant turn. Roles must be
 * system/user/assistant except for ChatML and Llama 3 (any role); Llama 2 also needs user
 * and assistant to alternate. *out is malloc'd. */
int sdn_chat_render(sdn_chat_kind kind, const sdn_chat_msg *msgs, int n, int add_generation_prompt, char **out, sdn_err *err);

/* Render a request: an optional system prompt (NULL = the template's default), documents,
 * and a question or instruction, as one system turn (if any) and one user turn, followed by
 * the generation prompt. The user turn is
 *     "Document:\n<doc>\n\n<question>"                          (one document)
 *     "Document 1:\n<doc1>\n\nDocument 2:\n<doc2>\n\n<question>"  (several)
 *     "<question>"                                              (no document)
 * (a NULL or empty question leaves only the documents). */
int sdn_chat_render_request(sdn_chat_kind kind, const char *system, const char *const *documents, int n_docs, const char *question,
                            char **out, sdn_err *err);

/* Model-specific variant: the family plus what the model's own template source adds.
 * `force` = SDN_CHAT_AUTO detects the family from `tmpl` (the model's
 * tokenizer.chat_template, may be NULL); any other kind forces that family. When `tmpl`
 * belongs to the chosen family its defaults are read from it (a ChatML template's default
 * system literal - Qwen2.5's, SmolLM2's, or none; whether a Llama 3 template has the 3.1+
 * dated header); otherwise the family defaults of sdn_chat_render apply. */
void sdn_chat_template_init(sdn_chat_template *ct, sdn_chat_kind force, const char *tmpl);
int sdn_chat_template_render(const sdn_chat_template *ct, const sdn_chat_msg *msgs, int n, int add_generation_prompt, char **out,
                             sdn_err *err);
int sdn_chat_template_render_request(const sdn_chat_template *ct, const char *system, const char *const *documents, int n_docs,
                                     const char *question, char **out, sdn_err *err);

/* Tokenize rendered chat text: control tokens parsed; BOS added per the model's add_bos
 * rule unless the text already starts with the BOS token's text (Llama 3 and Llama 2
 * templates write it themselves), so there is never a double BOS. */
int sdn_chat_tokenize(const sdn_tokenizer *t, const char *rendered, int32_t **ids, int *n_ids, sdn_err *err);

#endif
