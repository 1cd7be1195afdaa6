/* fuzz_chat_template.c - libFuzzer target for chat templates. The input is NUL-separated
 * fields: [0] a byte choosing the forced family (0 = detect) and add_generation_prompt,
 * [1] a model's Jinja template source (detection and default-system extraction), [2] the
 * system prompt ("-" = NULL), [3] the question, [4..] documents, also used as alternating
 * user/assistant messages. Rendered as a request and as a conversation. */
#include <stdlib.h>

#include "tokenizer/chat_template.h"
#include "fuzz/fuzz_util.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size > (1 << 16)) return 0;
    char *buf = malloc(size + 1);
    if (!buf) return 0;
    const char *f[12];
    int n = fz_fields(data, size, buf, f, 12);
    if (n < 4) {
        free(buf);
        return 0;
    }
    unsigned sel = (unsigned char)f[0][0];
    sdn_chat_kind kind = (sdn_chat_kind)(sel % 6);
    int gen = (sel >> 3) & 1;
    (void)sdn_chat_detect(f[1]);
    sdn_chat_kind named;
    (void)sdn_chat_kind_from_name(f[1], &named);
    sdn_chat_template ct;
    sdn_chat_template_init(&ct, kind, f[1]);
    const char *system = (f[2][0] == '-' && !f[2][1]) ? NULL : f[2];
    char *out = NULL;
    if (sdn_chat_template_render_request(&ct, system, f + 4, n - 4, f[3], &out, NULL) == SDN_OK) free(out);
    sdn_chat_msg msgs[10];
    int nm = 0;
    if (system) msgs[nm++] = (sdn_chat_msg){"system", system};
    for (int i = 3; i < n && nm < 10; i++) msgs[nm++] = (sdn_chat_msg){(i - 3) % 2 ? "assistant" : "user", f[i]};
    out = NULL;
    if (sdn_chat_template_render(&ct, msgs, nm, gen, &out, NULL) == SDN_OK) free(out);
    out = NULL;
    if (sdn_chat_render(kind, msgs, nm, !gen, &out, NULL) == SDN_OK) free(out);
    free(buf);
    return 0;
}
