/* reuse.c - the draft-reuse buffer (see reuse.h for the rule). */
#include "draft/reuse.h"

#include <string.h>

void sdn_reuse_defaults(sdn_reuse_config *cfg) {
    cfg->max_age = 3;
    cfg->accept_prob = 0.5f;
    cfg->rule = SDN_REUSE_AGE;
    cfg->threshold = 16;
}

void sdn_reuse_init(sdn_reuse *r, const sdn_reuse_config *cfg) {
    memset(r, 0, sizeof *r);
    if (cfg) r->cfg = *cfg;
    else sdn_reuse_defaults(&r->cfg);
}

/* First-ranked child of `parent` (-1 = root) in tree order, or -1. */
static int first_child(const sdn_tree *t, int parent) {
    for (int i = parent + 1; i < t->n; i++)
        if (t->parent[i] == parent) return i;
    return -1;
}

int sdn_reuse_extract(const sdn_draft_feedback *fb, int32_t *out, int cap) {
    const sdn_tree *t = fb->tree;
    if (!t || !fb->node_argmax || t->n == 0) return 0;
    /* the deepest accepted node: follow the accepted tokens down the tree */
    int cur = -1;
    for (int i = 0; i + 1 < fb->n_accepted; i++) {
        int nxt = -1;
        for (int j = cur + 1; j < t->n; j++)
            if (t->parent[j] == cur && t->token[j] == fb->accepted[i]) { nxt = j; break; }
        if (nxt < 0) break;
        cur = nxt;
    }
    /* the rejected chain below it */
    int chain[SDN_REUSE_MAX_LEN], m = 0;
    for (int c = first_child(t, cur); c >= 0 && m < SDN_REUSE_MAX_LEN; c = first_child(t, c)) chain[m++] = c;
    /* longest consistent run [g, e]: pi_i == token(r_{i+1}) for g <= i < e */
    int best_g = -1, best_len = 0;
    for (int g = 0; g < m; g++) {
        int e = g;
        while (e + 1 < m && fb->node_argmax[chain[e]] == t->token[chain[e + 1]]) e++;
        if (e - g > best_len) { best_len = e - g; best_g = g; }
    }
    if (best_len == 0) return 0;
    int n = 0;
    for (int i = best_g; i <= best_g + best_len && n < cap; i++) out[n++] = t->token[chain[i]];
    if (n < cap) out[n++] = fb->node_argmax[chain[best_g + best_len]];
    return n;
}

static void drop(sdn_reuse *r, int i) {
    r->seg[i] = r->seg[r->n_seg - 1];
    r->n_seg--;
}

void sdn_reuse_feedback(sdn_reuse *r, const sdn_draft_feedback *fb) {
    const int paper = r->cfg.rule == SDN_REUSE_PAPER;
    /* the paper's rule: every segment held now lived through this step (it was stored by an
       earlier step's feedback); a long draft ends all of them */
    const int long_step = paper && fb->tree && fb->tree->n > r->cfg.threshold;
    /* advance or drop the segments that were proposed */
    for (int i = r->n_seg - 1; i >= 0; i--) {
        sdn_reuse_seg *s = &r->seg[i];
        s->age++;
        if (long_step) { drop(r, i); continue; }
        if (s->offered) {
            /* how many of the committed tokens follow the segment from where it was offered */
            int best = 0, best_at = 0;
            int starts[2] = {s->offered - 1, s->offered_alt - 1};
            for (int a = 0; a < 2; a++) {
                int at = starts[a], k = 0;
                if (at < 0) continue;
                while (k < fb->n_accepted && at + k < s->n && fb->accepted[k] == s->tok[at + k]) k++;
                if (k > best) { best = k; best_at = at; }
            }
            if (best == 0 && !paper) { drop(r, i); continue; } /* stopped matching */
            if (best > 0) {
                s->pos = best_at + best;
                s->age = 0;
            }
        }
        s->offered = s->offered_alt = 0;
        if (s->pos >= s->n || (!paper && s->age > r->cfg.max_age)) drop(r, i);
    }
    int32_t tok[SDN_REUSE_MAX_LEN];
    int n = sdn_reuse_extract(fb, tok, SDN_REUSE_MAX_LEN);
    if (n < 2) return;
    if (r->n_seg == SDN_REUSE_MAX_SEGS) {
        int oldest = 0;
        for (int i = 1; i < r->n_seg; i++)
            if (r->seg[i].age > r->seg[oldest].age) oldest = i;
        drop(r, oldest);
    }
    sdn_reuse_seg *s = &r->seg[r->n_seg++];
    memset(s, 0, sizeof *s);
    memcpy(s->tok, tok, sizeof(int32_t) * (size_t)n);
    s->n = n;
}

int sdn_reuse_propose(sdn_reuse *r, int32_t t, sdn_reuse_chain *out, int cap) {
    int k = 0;
    for (int i = 0; i < r->n_seg && k < cap; i++) {
        sdn_reuse_seg *s = &r->seg[i];
        s->offered = s->offered_alt = 0;
        if (s->pos > 0) {
            /* partly accepted earlier: continue where the output is */
            out[k++] = (sdn_reuse_chain){s->tok + s->pos, s->n - s->pos, i, 0};
            s->offered = s->pos + 1;
            continue;
        }
        int j = -1;
        for (int x = 0; x < s->n; x++)
            if (s->tok[x] == t) { j = x; break; }
        if (j >= 0) {
            if (j + 1 < s->n) {
                out[k++] = (sdn_reuse_chain){s->tok + j + 1, s->n - j - 1, i, 0};
                s->offered = j + 2;
            }
            continue;
        }
        out[k++] = (sdn_reuse_chain){s->tok, s->n, i, 0}; /* missing tokens: t came before the segment */
        s->offered = 1;
        if (k < cap && s->n > 1) { /* synonym: t replaced its first token */
            out[k++] = (sdn_reuse_chain){s->tok + 1, s->n - 1, i, 1};
            s->offered_alt = 2;
        }
    }
    return k;
}

void sdn_reuse_unoffer(sdn_reuse *r, const sdn_reuse_chain *c) {
    if (c->seg < 0 || c->seg >= r->n_seg) return;
    if (c->alt) r->seg[c->seg].offered_alt = 0;
    else r->seg[c->seg].offered = 0;
}
