/* request.c - request rendering and tokenization (see request.h). */
#include "engine/request.h"

#include <stdlib.h>
#include <string.h>

#include "engine/chat_template.h"
#include "engine/gguf.h"
#include "engine/tokenizer.h"

int sdn_request_tokens(const sdn_model *m, const sdn_request *r, int32_t **ids, int *n_ids, char **text, sdn_err *err) {
    *ids = NULL;
    *n_ids = 0;
    if (text) *text = NULL;
    const sdn_tokenizer *tok = sdn_model_tokenizer(m);
    if (!tok) return sdn_fail(err, SDN_EINVAL, "%s: the model has no tokenizer", sdn_model_path(m));
    sdn_chat_kind kind = SDN_CHAT_AUTO;
    const char *name = r->chat_template;
    if (name && strcmp(name, "auto") != 0) {
        if (!strcmp(name, "none")) kind = SDN_CHAT_PLAIN;
        else if (sdn_chat_kind_from_name(name, &kind) != SDN_OK)
            return sdn_fail(err, SDN_EINVAL, "option --chat-template: unknown template '%s' (auto, none, chatml, llama3, llama2, vicuna, plain)", name);
    }
    if (kind == SDN_CHAT_AUTO) {
        const char *tmpl = sdn_tokenizer_chat_template(tok);
        kind = tmpl ? sdn_chat_detect(tmpl) : SDN_CHAT_PLAIN;
    }
    char *rendered = NULL;
    int rc = sdn_chat_render_request(kind, r->system, r->documents, r->n_docs, r->prompt ? r->prompt : "", &rendered, err);
    if (rc) return rc;
    /* Templates that write the BOS token themselves (Llama 3) must not get a second one. */
    int add_bos = sdn_tokenizer_add_bos(tok) && !sdn_chat_writes_bos(kind);
    rc = sdn_tokenize(tok, rendered, strlen(rendered), add_bos, kind != SDN_CHAT_PLAIN, ids, n_ids, err);
    if (!rc && *n_ids == 0) rc = sdn_fail(err, SDN_EINVAL, "the request renders to no tokens");
    if (text && !rc) *text = rendered;
    else free(rendered);
    return rc;
}
