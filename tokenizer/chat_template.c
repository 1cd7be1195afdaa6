/* chat_template.c - chat templates rendered by fixed C code per family (see chat_template.h).
 *
 * Each family writes the same text as the model's Jinja template for plain conversations
 * (no tools): ChatML as Qwen2.5's template, Llama 3 as Meta's 3.0 / 3.1+ templates (content
 * trimmed, 3.1+ always with a dated system turn; the date is the template's fallback
 * "26 Jul 2024" so prompts are reproducible), Llama 2 as Meta's Llama-2-chat template, Vicuna
 * as FastChat's vicuna_v1.1 conversation, Gemma as Google's Gemma 3 instruction template
 * (<bos> written as text; a system message is folded into the first user turn as
 * "<system>\n\n"; role "assistant" is written "model"; each turn's content trimmed, turns
 * "<start_of_turn>ROLE\n...<end_of_turn>\n"). Text is built in a growable string (common/sdn_str.h). */
#include "tokenizer/chat_template.h"

#include "common/sdn_str.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define VICUNA_SYSTEM                                                                                                                 \
    "A chat between a curious user and an artificial intelligence assistant. The assistant gives helpful, detailed, and polite answers " \
    "to the user's questions."
#define QWEN_SYSTEM "You are Qwen, created by Alibaba Cloud. You are a helpful assistant."
#define LLAMA3_DATE_HEADER "Cutting Knowledge Date: December 2023\nToday Date: 26 Jul 2024\n\n"


/* Python's str.strip(): Unicode White_Space plus the ASCII separators \x1c-\x1f. */
static size_t ws_len(const unsigned char *s, size_t n) {
    if (n >= 1 && ((s[0] >= 0x09 && s[0] <= 0x0D) || (s[0] >= 0x1C && s[0] <= 0x20))) return 1;
    if (n >= 2 && s[0] == 0xC2 && (s[1] == 0x85 || s[1] == 0xA0)) return 2;
    if (n >= 3 && s[0] == 0xE1 && s[1] == 0x9A && s[2] == 0x80) return 3;                 /* U+1680 */
    if (n >= 3 && s[0] == 0xE2 && s[1] == 0x80 && (s[2] <= 0x8A || s[2] == 0xA8 || s[2] == 0xA9 || s[2] == 0xAF)) return 3; /* U+2000-200A, 2028, 2029, 202F */
    if (n >= 3 && s[0] == 0xE2 && s[1] == 0x81 && s[2] == 0x9F) return 3;                 /* U+205F */
    if (n >= 3 && s[0] == 0xE3 && s[1] == 0x80 && s[2] == 0x80) return 3;                 /* U+3000 */
    return 0;
}

static void sb_add_trimmed(sdn_str *b, const char *s) {
    const unsigned char *u = (const unsigned char *)s;
    size_t n = strlen(s), a = 0, e = 0, l;
    while (a < n && (l = ws_len(u + a, n - a))) a += l;
    for (size_t p = a; p < n;) {
        if ((l = ws_len(u + p, n - p))) {
            p += l;
            continue;
        }
        p++;
        while (p < n && (u[p] & 0xC0) == 0x80) p++;
        e = p;
    }
    if (e > a) sdn_str_addn(b, s + a, e - a);
}

static int contains(const char *s, const char *needle) { return s && strstr(s, needle) != NULL; }

sdn_chat_kind sdn_chat_detect(const char *tmpl) {
    sdn_chat_kind k;
    if (!tmpl) return SDN_CHAT_PLAIN;
    if (!sdn_chat_kind_from_name(tmpl, &k) && k != SDN_CHAT_AUTO) return k;
    if (contains(tmpl, "<|im_start|>")) return SDN_CHAT_CHATML;
    if (contains(tmpl, "<|start_header_id|>") && contains(tmpl, "<|end_header_id|>")) return SDN_CHAT_LLAMA3;
    if (contains(tmpl, "[INST]")) return SDN_CHAT_LLAMA2;
    if (contains(tmpl, "USER: ") && contains(tmpl, "ASSISTANT: ")) return SDN_CHAT_VICUNA;
    if (contains(tmpl, "<start_of_turn>")) return SDN_CHAT_GEMMA;
    return SDN_CHAT_PLAIN;
}

static const char *const k_names[] = {"auto", "chatml", "llama3", "llama2", "vicuna", "plain", "gemma"};
#define N_KINDS ((int)(sizeof k_names / sizeof k_names[0]))

int sdn_chat_kind_from_name(const char *name, sdn_chat_kind *out) {
    for (int k = 0; k < N_KINDS; k++)
        if (name && !strcmp(name, k_names[k])) {
            *out = (sdn_chat_kind)k;
            return SDN_OK;
        }
    return SDN_EINVAL;
}

int sdn_chat_writes_bos(sdn_chat_kind kind) { return kind == SDN_CHAT_LLAMA3 || kind == SDN_CHAT_LLAMA2 || kind == SDN_CHAT_GEMMA; }

const char *sdn_chat_kind_name(sdn_chat_kind kind) { return ((int)kind >= 0 && (int)kind < N_KINDS) ? k_names[kind] : "?"; }

/* ChatML templates write their default system turn as a string literal
 * '<|im_start|>system\n<text><|im_end|>\n'; find the first such literal whose text is plain. */
static void chatml_default_system(const char *tmpl, char *out, size_t cap) {
    out[0] = 0;
    const char *key = "<|im_start|>system";
    for (const char *p = tmpl ? strstr(tmpl, key) : NULL; p; p = strstr(p + 1, key)) {
        const char *s = p + strlen(key);
        if (s[0] == '\\' && s[1] == 'n') s += 2;
        else if (s[0] == '\n') s += 1;
        else continue;
        const char *e = strstr(s, "<|im_end|>");
        if (!e || e == s) continue;
        if (memchr(s, '\'', (size_t)(e - s)) || memchr(s, '"', (size_t)(e - s)) || memchr(s, '{', (size_t)(e - s)) || memchr(s, '}', (size_t)(e - s)))
            continue;
        size_t o = 0;
        for (const char *q = s; q < e && o + 1 < cap; q++) {
            if (*q == '\\' && q + 1 < e) {
                q++;
                out[o++] = *q == 'n' ? '\n' : *q == 't' ? '\t' : *q;
            } else {
                out[o++] = *q;
            }
        }
        out[o] = 0;
        return;
    }
}

void sdn_chat_template_init(sdn_chat_template *ct, sdn_chat_kind force, const char *tmpl) {
    memset(ct, 0, sizeof *ct);
    sdn_chat_kind detected = sdn_chat_detect(tmpl);
    ct->kind = force == SDN_CHAT_AUTO ? detected : force;
    sdn_chat_kind by_name;
    /* a real template source of the same family (not just a name) refines the defaults */
    int same = tmpl && detected == ct->kind && sdn_chat_kind_from_name(tmpl, &by_name) != SDN_OK;
    switch (ct->kind) {
    case SDN_CHAT_CHATML:
        if (same) chatml_default_system(tmpl, ct->default_system, sizeof ct->default_system);
        else snprintf(ct->default_system, sizeof ct->default_system, "%s", QWEN_SYSTEM);
        break;
    case SDN_CHAT_LLAMA3:
        ct->llama3_dated = same ? contains(tmpl, "Cutting Knowledge Date") : 1;
        break;
    case SDN_CHAT_VICUNA:
        snprintf(ct->default_system, sizeof ct->default_system, "%s", VICUNA_SYSTEM);
        break;
    default:
        break;
    }
}

static int is_role(const sdn_chat_msg *m, const char *r) { return m->role && !strcmp(m->role, r); }

int sdn_chat_template_render(const sdn_chat_template *ct, const sdn_chat_msg *msgs, int n, int add_generation_prompt, char **out, sdn_err *err) {
    *out = NULL;
    if (!ct || n < 0 || (n > 0 && !msgs)) return sdn_fail(err, SDN_EINVAL, "chat template: no template or no messages");
    for (int i = 0; i < n; i++)
        if (!msgs[i].role || !msgs[i].content || !msgs[i].role[0])
            return sdn_fail(err, SDN_EINVAL, "chat template: message %d has no role or no content", i);
    sdn_str b = {0};
    sdn_str_add(&b, ""); /* always a string, even for an empty conversation */
    int first = 0;
    const char *sys = NULL;
    if (n > 0 && is_role(&msgs[0], "system")) {
        sys = msgs[0].content;
        first = 1;
    }
    switch (ct->kind) {
    case SDN_CHAT_CHATML:
        if (!sys && ct->default_system[0]) {
            sdn_str_add(&b, "<|im_start|>system\n");
            sdn_str_add(&b, ct->default_system);
            sdn_str_add(&b, "<|im_end|>\n");
        }
        for (int i = 0; i < n; i++) {
            sdn_str_add(&b, "<|im_start|>");
            sdn_str_add(&b, msgs[i].role);
            sdn_str_add(&b, "\n");
            sdn_str_add(&b, msgs[i].content);
            sdn_str_add(&b, "<|im_end|>\n");
        }
        if (add_generation_prompt) sdn_str_add(&b, "<|im_start|>assistant\n");
        break;
    case SDN_CHAT_LLAMA3:
        sdn_str_add(&b, "<|begin_of_text|>");
        if (ct->llama3_dated || sys || ct->default_system[0]) {
            sdn_str_add(&b, "<|start_header_id|>system<|end_header_id|>\n\n");
            if (ct->llama3_dated) sdn_str_add(&b, LLAMA3_DATE_HEADER);
            sb_add_trimmed(&b, sys ? sys : ct->default_system);
            sdn_str_add(&b, "<|eot_id|>");
        }
        for (int i = first; i < n; i++) {
            sdn_str_add(&b, "<|start_header_id|>");
            sdn_str_add(&b, msgs[i].role);
            sdn_str_add(&b, "<|end_header_id|>\n\n");
            sb_add_trimmed(&b, msgs[i].content);
            sdn_str_add(&b, "<|eot_id|>");
        }
        if (add_generation_prompt) sdn_str_add(&b, "<|start_header_id|>assistant<|end_header_id|>\n\n");
        break;
    case SDN_CHAT_LLAMA2: {
        const char *s = sys ? sys : (ct->default_system[0] ? ct->default_system : NULL);
        for (int i = first; i < n; i++) {
            int k = i - first;
            int user = is_role(&msgs[i], "user");
            if (!user && !is_role(&msgs[i], "assistant")) {
                free(b.p);
                return sdn_fail(err, SDN_EINVAL, "chat template llama2: message %d has role '%s' (only a first system message, then user/assistant)", i, msgs[i].role);
            }
            if (user != (k % 2 == 0)) {
                free(b.p);
                return sdn_fail(err, SDN_EINVAL, "chat template llama2: message %d: roles must alternate user/assistant/user/...", i);
            }
            sdn_str c = {0};
            sdn_str_add(&c, "");
            if (k == 0 && s) {
                sdn_str_add(&c, "<<SYS>>\n");
                sdn_str_add(&c, s);
                sdn_str_add(&c, "\n<</SYS>>\n\n");
            }
            sdn_str_add(&c, msgs[i].content);
            if (c.oom) b.oom = 1;
            if (user) {
                sdn_str_add(&b, "<s>[INST] ");
                if (c.p) sb_add_trimmed(&b, c.p);
                sdn_str_add(&b, " [/INST]");
            } else {
                sdn_str_add(&b, " ");
                if (c.p) sb_add_trimmed(&b, c.p);
                sdn_str_add(&b, " </s>");
            }
            free(c.p);
        }
        break;
    }
    case SDN_CHAT_VICUNA: {
        const char *s = sys ? sys : ct->default_system;
        if (s[0]) {
            sdn_str_add(&b, s);
            sdn_str_add(&b, " ");
        }
        for (int i = first; i < n; i++) {
            if (is_role(&msgs[i], "user")) {
                sdn_str_add(&b, "USER: ");
                sdn_str_add(&b, msgs[i].content);
                sdn_str_add(&b, " ");
            } else if (is_role(&msgs[i], "assistant")) {
                sdn_str_add(&b, "ASSISTANT: ");
                sdn_str_add(&b, msgs[i].content);
                sdn_str_add(&b, "</s>");
            } else {
                free(b.p);
                return sdn_fail(err, SDN_EINVAL, "chat template vicuna: message %d has role '%s' (only a first system message, then user/assistant)", i, msgs[i].role);
            }
        }
        if (add_generation_prompt) sdn_str_add(&b, "ASSISTANT:");
        break;
    }
    case SDN_CHAT_GEMMA:
        sdn_str_add(&b, "<bos>");
        for (int i = first; i < n; i++) {
            int user = is_role(&msgs[i], "user");
            if (user != ((i - first) % 2 == 0) || (!user && !is_role(&msgs[i], "assistant"))) {
                free(b.p);
                return sdn_fail(err, SDN_EINVAL, "chat template gemma: message %d has role '%s': after an optional first system message, roles must alternate user/assistant/user/...", i, msgs[i].role);
            }
            sdn_str_add(&b, user ? "<start_of_turn>user\n" : "<start_of_turn>model\n");
            if (i == first && sys) {
                sdn_str_add(&b, sys);
                sdn_str_add(&b, "\n\n");
            }
            sb_add_trimmed(&b, msgs[i].content);
            sdn_str_add(&b, "<end_of_turn>\n");
        }
        if (add_generation_prompt) sdn_str_add(&b, "<start_of_turn>model\n");
        break;
    case SDN_CHAT_PLAIN:
    default: {
        const char *s = sys ? sys : ct->default_system;
        if (s[0]) {
            sdn_str_add(&b, s);
            sdn_str_add(&b, "\n\n");
        }
        for (int i = first; i < n; i++) {
            if (is_role(&msgs[i], "user")) sdn_str_add(&b, "User: ");
            else if (is_role(&msgs[i], "assistant")) sdn_str_add(&b, "Assistant: ");
            else {
                free(b.p);
                return sdn_fail(err, SDN_EINVAL, "chat template plain: message %d has role '%s' (only a first system message, then user/assistant)", i, msgs[i].role);
            }
            sdn_str_add(&b, msgs[i].content);
            sdn_str_add(&b, "\n");
        }
        if (add_generation_prompt) sdn_str_add(&b, "Assistant:");
        break;
    }
    }
    if (b.oom) {
        free(b.p);
        return sdn_fail(err, SDN_ENOMEM, "chat template: out of memory");
    }
    *out = b.p;
    return SDN_OK;
}

int sdn_chat_template_render_request(const sdn_chat_template *ct, const char *system, const char *const *documents, int n_docs,
                                     const char *question, char **out, sdn_err *err) {
    *out = NULL;
    if (!ct || n_docs < 0 || (n_docs > 0 && !documents)) return sdn_fail(err, SDN_EINVAL, "chat request: bad documents");
    sdn_str u = {0};
    sdn_str_add(&u, "");
    for (int i = 0; i < n_docs; i++) {
        if (!documents[i]) {
            free(u.p);
            return sdn_fail(err, SDN_EINVAL, "chat request: document %d is NULL", i);
        }
        char head[48];
        if (n_docs == 1) snprintf(head, sizeof head, "Document:\n");
        else snprintf(head, sizeof head, "Document %d:\n", i + 1);
        if (i > 0) sdn_str_add(&u, "\n\n");
        sdn_str_add(&u, head);
        sdn_str_add(&u, documents[i]);
    }
    if (question && question[0]) {
        if (n_docs > 0) sdn_str_add(&u, "\n\n");
        sdn_str_add(&u, question);
    }
    if (u.oom) {
        free(u.p);
        return sdn_fail(err, SDN_ENOMEM, "chat request: out of memory");
    }
    sdn_chat_msg m[2];
    int n = 0;
    if (system) m[n++] = (sdn_chat_msg){"system", system};
    m[n++] = (sdn_chat_msg){"user", u.p};
    int rc = sdn_chat_template_render(ct, m, n, 1, out, err);
    free(u.p);
    return rc;
}

int sdn_chat_render(sdn_chat_kind kind, const sdn_chat_msg *msgs, int n, int add_generation_prompt, char **out, sdn_err *err) {
    sdn_chat_template ct;
    sdn_chat_template_init(&ct, kind == SDN_CHAT_AUTO ? SDN_CHAT_PLAIN : kind, NULL);
    return sdn_chat_template_render(&ct, msgs, n, add_generation_prompt, out, err);
}

int sdn_chat_render_request(sdn_chat_kind kind, const char *system, const char *const *documents, int n_docs, const char *question,
                            char **out, sdn_err *err) {
    sdn_chat_template ct;
    sdn_chat_template_init(&ct, kind == SDN_CHAT_AUTO ? SDN_CHAT_PLAIN : kind, NULL);
    return sdn_chat_template_render_request(&ct, system, documents, n_docs, question, out, err);
}

int sdn_chat_tokenize(const sdn_tokenizer *t, const char *rendered, int32_t **ids, int *n_ids, sdn_err *err) {
    *ids = NULL;
    *n_ids = 0;
    if (!t || !rendered) return sdn_fail(err, SDN_EINVAL, "sdn_chat_tokenize: no tokenizer or no text");
    int add_bos = sdn_tokenizer_add_bos(t);
    int32_t bos = sdn_tokenizer_bos(t);
    if (add_bos && bos >= 0) {
        size_t bl;
        const char *bp = sdn_tokenizer_piece(t, bos, &bl);
        if (bp && bl && !strncmp(rendered, bp, bl)) add_bos = 0;
    }
    return sdn_tokenize(t, rendered, strlen(rendered), add_bos, 1, ids, n_ids, err);
}
