/* request.c - request rendering and tokenization (see request.h).
 *
 * Rule: a model whose file has a chat template gets its family's rendering (chat_template.h);
 * a model without one (base models such as TinyStories, llama2.c checkpoints) or
 * `--chat-template none` gets raw text: the documents separated by blank lines, a blank
 * line, then the prompt, tokenized without control-token parsing. */
#include "tokenizer/request.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "tokenizer/chat_template.h"
#include "tokenizer/tokenizer.h"

static char *raw_text(const sdn_request *r) {
    size_t n = strlen(r->prompt ? r->prompt : "") + 1;
    for (int i = 0; i < r->n_docs; i++) n += strlen(r->documents[i]) + 2;
    char *s = malloc(n + 1), *p = s;
    if (!s) return NULL;
    for (int i = 0; i < r->n_docs; i++) {
        size_t l = strlen(r->documents[i]);
        memcpy(p, r->documents[i], l);
        p += l;
        /* one blank line between parts */
        while (p > s && p[-1] == '\n') p--;
        memcpy(p, "\n\n", 2);
        p += 2;
    }
    if (r->prompt) { size_t l = strlen(r->prompt); memcpy(p, r->prompt, l); p += l; }
    *p = 0;
    return s;
}

size_t sdn_request_max_bytes(const sdn_model *m, int max_tokens) {
    const sdn_tokenizer *tok = sdn_model_tokenizer(m);
    if (!tok || max_tokens <= 0) return SIZE_MAX;
    return (size_t)max_tokens * (size_t)sdn_tokenizer_max_text_bytes(tok);
}

/* Refuse, before tokenizing, a text too long to fit r->max_tokens tokens. */
static int check_size(const sdn_model *m, const sdn_request *r, const char *rendered, sdn_err *err) {
    size_t cap = sdn_request_max_bytes(m, r->max_tokens), n = strlen(rendered);
    if (n <= cap) return SDN_OK;
    return sdn_fail(err, SDN_EINVAL,
                    "the request is %zu bytes, at least %zu tokens with this tokenizer (%d bytes per token at most), more than the "
                    "context of %d (raise --ctx or shorten the context)",
                    n, n / (size_t)sdn_tokenizer_max_text_bytes(sdn_model_tokenizer(m)), sdn_tokenizer_max_text_bytes(sdn_model_tokenizer(m)),
                    r->max_tokens);
}

int sdn_request_tokens(const sdn_model *m, const sdn_request *r, int32_t **ids, int *n_ids, char **text, sdn_err *err) {
    *ids = NULL;
    *n_ids = 0;
    if (text) *text = NULL;
    const sdn_tokenizer *tok = sdn_model_tokenizer(m);
    if (!tok) return sdn_fail(err, SDN_EINVAL, "%s: the model has no tokenizer", sdn_model_path(m));
    const char *name = r->chat_template, *tmpl = sdn_tokenizer_chat_template(tok);
    int raw = (name && !strcmp(name, "none")) || ((!name || !strcmp(name, "auto")) && !tmpl);
    char *rendered = NULL;
    int rc;
    if (r->n_messages > 0 && (r->n_docs > 0 || r->prompt))
        return sdn_fail(err, SDN_EINVAL, "a request is either a conversation (messages) or a prompt with documents, not both");
    if (r->n_messages > 0) {
        sdn_chat_kind kind = raw ? SDN_CHAT_PLAIN : SDN_CHAT_AUTO;
        if (!raw && name && strcmp(name, "auto") != 0 && sdn_chat_kind_from_name(name, &kind) != SDN_OK)
            return sdn_fail(err, SDN_EINVAL, "option --chat-template: unknown template '%s' (auto, none, chatml, llama3, llama2, vicuna, plain, gemma)", name);
        sdn_chat_template ct;
        sdn_chat_template_init(&ct, kind, raw ? NULL : tmpl);
        rc = sdn_chat_template_render(&ct, r->messages, r->n_messages, 1, &rendered, err);
        if (!rc) rc = check_size(m, r, rendered, err);
        if (!rc) rc = raw ? sdn_tokenize(tok, rendered, strlen(rendered), sdn_tokenizer_add_bos(tok), 0, ids, n_ids, err)
                          : sdn_chat_tokenize(tok, rendered, ids, n_ids, err);
    } else if (raw) {
        if (!(rendered = raw_text(r))) return sdn_fail(err, SDN_ENOMEM, "out of memory");
        if ((rc = check_size(m, r, rendered, err))) {
            free(rendered);
            return rc;
        }
        rc = sdn_tokenize(tok, rendered, strlen(rendered), sdn_tokenizer_add_bos(tok), 0, ids, n_ids, err);
    } else {
        sdn_chat_kind kind = SDN_CHAT_AUTO;
        if (name && strcmp(name, "auto") != 0 && sdn_chat_kind_from_name(name, &kind) != SDN_OK)
            return sdn_fail(err, SDN_EINVAL, "option --chat-template: unknown template '%s' (auto, none, chatml, llama3, llama2, vicuna, plain, gemma)", name);
        sdn_chat_template ct;
        sdn_chat_template_init(&ct, kind, tmpl);
        rc = sdn_chat_template_render_request(&ct, r->system, r->documents, r->n_docs, r->prompt, &rendered, err);
        if (!rc) rc = check_size(m, r, rendered, err);
        if (!rc) rc = sdn_chat_tokenize(tok, rendered, ids, n_ids, err);
    }
    if (!rc && *n_ids == 0) rc = sdn_fail(err, SDN_EINVAL, "the request renders to no tokens");
    if (text && !rc) *text = rendered;
    else free(rendered);
    return rc;
}
