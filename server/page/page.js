/* page.js - the script of the page of `sdnpu serve` (index.html). It sends the document and the
 * question to this server's POST /v1/chat/completions as a stream and shows each piece of the
 * answer as the server's `sdnpu` extension of the chunks describes it (docs/server.md): the text
 * of each token and where it came from. Everything shown is set with textContent (a document
 * holding HTML or script shows as text); the API key is read from its field for each request
 * and kept nowhere else. */
"use strict";

/* Built-in examples: the demo's document (`sdnpu demo`), a short RAG question, a UI action in a
   JSON schema (docs/server.md). */
const EXAMPLES = [
  {
    name: "the Gettysburg Address (the demo's)",
    task: "summarize",
    question: "Summarize the speech in a few sentences.",
    document: "Address delivered at the dedication of the Cemetery at Gettysburg.\n\n" +
      "Four score and seven years ago our fathers brought forth on this continent, a new nation, conceived in Liberty, and " +
      "dedicated to the proposition that all men are created equal.\n\n" +
      "Now we are engaged in a great civil war, testing whether that nation, or any nation so conceived and so dedicated, can " +
      "long endure. We are met on a great battle-field of that war. We have come to dedicate a portion of that field, as a final " +
      "resting place for those who here gave their lives that that nation might live. It is altogether fitting and proper that " +
      "we should do this.\n\n" +
      "But, in a larger sense, we can not dedicate -- we can not consecrate -- we can not hallow -- this ground. The brave men, " +
      "living and dead, who struggled here, have consecrated it, far above our poor power to add or detract. The world will " +
      "little note, nor long remember what we say here, but it can never forget what they did here. It is for us the living, " +
      "rather, to be dedicated here to the unfinished work which they who fought here have thus far so nobly advanced. It is " +
      "rather for us to be here dedicated to the great task remaining before us -- that from these honored dead we take " +
      "increased devotion to that cause for which they gave the last full measure of devotion -- that we here highly resolve " +
      "that these dead shall not have died in vain -- that this nation, under God, shall have a new birth of freedom -- and that " +
      "government of the people, by the people, for the people, shall not perish from the earth.\n\n" +
      "Abraham Lincoln\nNovember 19, 1863\n",
  },
  {
    name: "a lighthouse (ask twice: the second answer drafts from the first)",
    task: "answer",
    question: "When was the lighthouse built, and when was its lamp repaired?",
    document: "The lighthouse on Gull Rock was built in 1871. Its lamp was repaired in 1903 and again in 1950. " +
      "The council voted to repair the lamp once more and to open the lighthouse to visitors on Sundays.",
  },
  {
    name: "a UI action in a JSON schema",
    task: "json",
    question: "Task: open the camera. Which element do you act on?",
    document: "<button id=1 text=\"Open camera\"></button>\n<button id=2 text=\"Settings\"></button>\n" +
      "<input id=3 text=\"Search\"></input>",
    schema: JSON.stringify({
      type: "object",
      properties: {
        id: { type: "integer" },
        action: { type: "string", enum: ["tap", "text", "long_tap", "scroll_up", "scroll_down", "go_back", "N/A"] },
        input_text: { type: "string" },
      },
      required: ["id", "action", "input_text"],
    }, null, 2),
  },
];

const DEFAULT_SCHEMA = JSON.stringify({
  type: "object",
  properties: { answer: { type: "string" }, found_in_document: { type: "boolean" } },
  required: ["answer", "found_in_document"],
}, null, 2);

const SOURCE_TITLES = {
  prompt: "drafted from the document or question, accepted",
  answer: "drafted from earlier in this answer, accepted",
  history: "drafted from an earlier answer of the task group, accepted",
  grammar: "text the schema forces, accepted",
  reuse: "a draft kept from an earlier step, accepted",
  draft: "drafted, accepted",
  recycled: "the model's own prediction after the same token in an earlier step, accepted",
  model: "decoded by the model alone",
};

const $ = (id) => document.getElementById(id);
let running = null; /* the AbortController of the request in flight */

function setText(id, text) { $(id).textContent = String(text); }

function fmt(x, digits) { return Number.isFinite(x) ? x.toFixed(digits) : "-"; }

/* The request body, as an OpenAI client would send it. */
function requestBody(method, forPlain) {
  const doc = $("document").value;
  const question = $("question").value.trim() || "Summarize the document.";
  const content = doc.trim() ? "Document:\n" + doc + "\n\n" + question : question;
  const body = {
    messages: [{ role: "user", content: content }],
    max_tokens: Math.max(1, parseInt($("max-tokens").value, 10) || 160),
    temperature: Math.max(0, parseFloat($("temperature").value) || 0),
    stream: true,
    sdnpu: { method: method },
  };
  const user = $("user").value.trim();
  if (user) body.user = user;
  if (forPlain) body.sdnpu.store_answer = false; /* the comparison run leaves the task group's history alone */
  if ($("task").value === "json") {
    body.response_format = { type: "json_schema", json_schema: { name: "answer", schema: JSON.parse($("schema").value) } };
  }
  return body;
}

/* One streamed request: calls onChunk(parsed chunk) for each event; returns the last chunk
   (the one with finish_reason). Throws an Error with the server's message on failure. */
async function stream(body, signal, onChunk) {
  const headers = { "Content-Type": "application/json" };
  const key = $("api-key").value;
  if (key) headers.Authorization = "Bearer " + key;
  const r = await fetch("/v1/chat/completions", { method: "POST", headers: headers, body: JSON.stringify(body), signal: signal });
  if (!r.ok) {
    let msg = "HTTP " + r.status;
    try { const e = await r.json(); if (e && e.error && e.error.message) msg += ": " + e.error.message; } catch (_) { /* not JSON */ }
    throw new Error(msg);
  }
  const reader = r.body.getReader();
  const dec = new TextDecoder();
  let buf = "", last = null;
  for (;;) {
    const { value, done } = await reader.read();
    if (done) break;
    buf += dec.decode(value, { stream: true });
    let cut;
    while ((cut = buf.indexOf("\n\n")) >= 0) {
      const event = buf.slice(0, cut);
      buf = buf.slice(cut + 2);
      for (const line of event.split("\n")) {
        if (!line.startsWith("data: ")) continue;
        const data = line.slice(6);
        if (data === "[DONE]") return last;
        const obj = JSON.parse(data);
        if (obj.error) throw new Error(obj.error.message || "the server reported an error");
        onChunk(obj);
        if (obj.choices && obj.choices[0] && obj.choices[0].finish_reason) last = obj;
      }
    }
  }
  return last;
}

/* Shows a chunk's text in `box`: one span per piece, marked by its source. */
function showPieces(box, chunk, step) {
  const choice = chunk.choices && chunk.choices[0];
  const text = choice && choice.delta ? choice.delta.content : undefined;
  const ext = chunk.sdnpu;
  if (ext && Array.isArray(ext.pieces)) {
    for (const p of ext.pieces) {
      const span = document.createElement("span");
      const src = typeof p.source === "string" && SOURCE_TITLES[p.source] ? p.source : "draft";
      span.className = "tok src-" + src + (src === "model" ? "" : " accepted") + (/\S/.test(String(p.text)) ? "" : " space");
      const t = String(p.text);
      /* a token's leading spaces stay unmarked, so a mark covers the word (and never ends a line) */
      const lead = src === "model" ? 0 : t.length - t.replace(/^\s+/, "").length;
      if (lead > 0 && lead < t.length) box.appendChild(document.createTextNode(t.slice(0, lead)));
      span.textContent = lead < t.length ? t.slice(lead) : t;
      span.title = SOURCE_TITLES[src] + " (step " + step + ")";
      box.appendChild(span);
    }
  } else if (typeof text === "string" && text) {
    box.appendChild(document.createTextNode(text)); /* text the server sent without pieces */
  }
}

/* Runs one request into the panel whose element ids start with `prefix` ("" or "plain-");
   returns {text, steps, tokens, seconds, final}. */
async function run(method, prefix, signal) {
  const box = $(prefix ? "plain-answer" : "answer");
  box.replaceChildren();
  const body = requestBody(method, prefix !== "");
  const t0 = performance.now();
  let tFirst = null, steps = 0, tokens = 0, text = "";
  setText(prefix + "status", "waiting");
  const final = await stream(body, signal, (chunk) => {
    const ext = chunk.sdnpu;
    const choice = chunk.choices && chunk.choices[0];
    if (choice && choice.finish_reason) return; /* the final chunk: statistics, below */
    if (choice && choice.delta && typeof choice.delta.content === "string") text += choice.delta.content;
    if (ext && Number.isFinite(ext.steps)) {
      steps = ext.steps;
      tokens = ext.tokens;
      if (tFirst === null) tFirst = performance.now();
      showPieces(box, chunk, steps);
      setText(prefix + "status", "streaming");
      setText(prefix + "steps", steps);
      if (!prefix) {
        setText("tokens", tokens);
        setText("per-step", fmt(tokens / Math.max(1, steps), 2));
      }
      const s = (performance.now() - tFirst) / 1000;
      if (s > 0.05 && tokens > 1) setText(prefix + "tps", fmt((tokens - 1) / s, 1));
    } else {
      showPieces(box, chunk, steps);
    }
    setText(prefix + "time", fmt((performance.now() - t0) / 1000, 2) + " s");
  });
  const seconds = (performance.now() - t0) / 1000;
  const x = final && final.sdnpu ? final.sdnpu : {};
  if (Number.isFinite(x.steps)) steps = x.steps;
  if (final && final.usage) tokens = final.usage.completion_tokens;
  setText(prefix + "steps", steps);
  setText(prefix + "time", fmt(seconds, 2) + " s");
  let decode = NaN;
  if (x.decode_ms_per_token > 0) {
    setText(prefix + "tps", fmt(1000 / x.decode_ms_per_token, 1));
    decode = x.decode_ms_per_token * tokens / 1000;
    setText(prefix + "decode", fmt(decode, 2) + " s");
  }
  if (!prefix) {
    setText("tokens", tokens);
    setText("per-step", fmt(tokens / Math.max(1, steps), 2));
  }
  /* the prefill, and how much of the prompt the prefix cache gave (a document read before) */
  if (Number.isFinite(x.prefill_ms)) {
    const prompt = final && final.usage ? final.usage.prompt_tokens : 0;
    let p = fmt(x.prefill_ms / 1000, 2) + " s";
    if (x.prefix_cache_tokens > 0) p += " (" + x.prefix_cache_tokens + " of " + prompt + " prompt tokens from the prefix cache)";
    setText(prefix + "prefill", p);
  }
  setText(prefix + "status", "done");
  return { text: text, steps: steps, tokens: tokens, seconds: seconds, decode: decode, final: final };
}

function settingsLine() {
  const b = requestBody($("method").value, false);
  const parts = ["method " + b.sdnpu.method, "temperature " + b.temperature, "max tokens " + b.max_tokens];
  if (b.user) parts.push("task group " + b.user);
  if (b.response_format) parts.push("JSON schema");
  return parts.join(" \u00b7 ");
}

async function ask() {
  if (running) return;
  if ($("task").value === "json") {
    try { JSON.parse($("schema").value); } catch (e) {
      setText("status", "error: the JSON schema does not parse: " + e.message);
      $("status").classList.add("error");
      return;
    }
  }
  running = new AbortController();
  $("ask").disabled = true;
  $("stop").disabled = false;
  $("status").classList.remove("error");
  for (const id of ["steps", "tokens"]) setText(id, 0);
  for (const id of ["per-step", "tps", "time", "decode"]) setText(id, "-");
  setText("settings-line", settingsLine());
  const compare = $("compare").checked;
  $("plain-box").hidden = !compare;
  setText("verdict", "");
  setText("verdict-note", "");
  let which = "";
  try {
    const spec = await run($("method").value, "", running.signal);
    if (compare) {
      which = "plain-";
      for (const id of ["plain-steps", "plain-tps", "plain-time", "plain-decode"]) setText(id, "-");
      const plain = await run("none", "plain-", running.signal);
      const same = plain.text === spec.text;
      let v = (same ? "Same text. " : "The texts differ (sampling, or a cut answer). ") +
        "Speculative: " + spec.steps + " steps, decoded in " + fmt(spec.decode, 2) + " s; plain: " + plain.steps +
        " steps, decoded in " + fmt(plain.decode, 2) + " s";
      if (spec.steps > 0 && spec.decode > 0) {
        v += ": " + fmt(plain.steps / spec.steps, 2) + "x fewer steps, " + fmt(plain.decode / spec.decode, 2) + "x the decoding speed.";
      }
      setText("verdict", v);
      setText("verdict-note", "Decoding times are the server's; the total times include reading the prompt, which the " +
        "second run takes from the first's cache.");
    }
  } catch (e) {
    const msg = e && e.name === "AbortError" ? "stopped" : "error: " + (e && e.message ? e.message : String(e));
    setText(which + "status", msg);
    if (msg !== "stopped") $(which + "status").classList.add("error");
  } finally {
    running = null;
    $("ask").disabled = false;
    $("stop").disabled = true;
  }
}

function taskChanged() {
  const t = $("task").value;
  $("schema-box").hidden = t !== "json";
  if (t === "json" && !$("schema").value.trim()) $("schema").value = DEFAULT_SCHEMA;
  const q = $("question");
  const summary = "Summarize the document.";
  if (t === "summarize" && !q.value.trim()) q.value = summary;
  if (t !== "summarize" && q.value === summary) q.value = "";
  q.placeholder = t === "summarize" ? summary : "Ask about the document.";
}

function exampleChosen() {
  const i = parseInt($("example").value, 10);
  if (!(i >= 0 && i < EXAMPLES.length)) return;
  const ex = EXAMPLES[i];
  $("document").value = ex.document;
  $("question").value = ex.question;
  $("task").value = ex.task;
  if (ex.schema) $("schema").value = ex.schema;
  taskChanged();
}

function fileChosen() {
  const f = $("file").files && $("file").files[0];
  if (!f) return;
  const reader = new FileReader();
  reader.onload = () => {
    $("document").value = String(reader.result);
    $("example").value = "";
  };
  reader.onerror = () => setText("status", "error: cannot read " + f.name);
  reader.readAsText(f);
}

function init() {
  const sel = $("example");
  EXAMPLES.forEach((ex, i) => {
    const o = document.createElement("option");
    o.value = String(i);
    o.textContent = ex.name;
    sel.appendChild(o);
  });
  sel.addEventListener("change", exampleChosen);
  $("task").addEventListener("change", taskChanged);
  $("file").addEventListener("change", fileChosen);
  $("ask").addEventListener("click", ask);
  $("stop").addEventListener("click", () => { if (running) running.abort(); });
  $("schema").value = DEFAULT_SCHEMA;
  sel.value = "0";
  exampleChosen();
}

document.addEventListener("DOMContentLoaded", init);
