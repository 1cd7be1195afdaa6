#!/usr/bin/env python3
"""test_page.py - the page of `sdnpu serve` (GET /, server/page/) in headless Chromium, driven by
Selenium, against a running server (scripts/test-page.sh starts one with SmolLM2 and an API key):

  1. the page and its files come with a Content-Security-Policy; the API refuses a request
     without the key (so the page's key field is what makes it work);
  2. a whole request through the page (an example document, the key typed in): the streamed
     answer equals the API's answer to the same request, drafted tokens are marked
     (span.accepted inside #answer), #steps is below the token count, #status reads done;
  3. the same request again: its answer drafts from the first (span.accepted.src-history);
  4. a document holding <script> and an <img onerror> is shown as text and runs nothing, also
     where the answer repeats it;
  5. plain decoding side by side (#compare): the same text, both times shown;
  6. a document asked about again after another one: its blocks come from the server's prefix
     cache, the answer is the same and #prefill says so;
  7. the browser console has no errors (CSP violations, failed loads, exceptions).
With --screenshots DIR it also saves the page after an answer at a laptop size (1366x900) and a
phone size (390x844) as DIR/page-laptop.png and DIR/page-phone.png.

usage: test_page.py BASE_URL API_KEY [--screenshots DIR]
"""
import json
import sys
import time
import urllib.error
import urllib.request

from selenium import webdriver
from selenium.webdriver.common.by import By
from selenium.webdriver.support.ui import Select, WebDriverWait

base, key = sys.argv[1].rstrip("/"), sys.argv[2]
shots = sys.argv[sys.argv.index("--screenshots") + 1] if "--screenshots" in sys.argv else None
failures = []


def check(cond, what):
    print(("ok   " if cond else "FAIL ") + what, flush=True)
    if not cond:
        failures.append(what)


def http(path, body=None, auth=True):
    req = urllib.request.Request(base + path, data=json.dumps(body).encode() if body is not None else None)
    if body is not None:
        req.add_header("Content-Type", "application/json")
    if auth:
        req.add_header("Authorization", "Bearer " + key)
    try:
        with urllib.request.urlopen(req, timeout=300) as r:
            return r.status, dict(r.headers), r.read()
    except urllib.error.HTTPError as e:
        return e.code, dict(e.headers), e.read()


def api_answer(document, question, max_tokens):
    """The answer of the API to the request the page sends (not streamed, not stored)."""
    body = {"messages": [{"role": "user", "content": "Document:\n" + document + "\n\n" + question}],
            "max_tokens": max_tokens, "temperature": 0, "user": "page", "sdnpu": {"method": "sdnpu", "store_answer": False}}
    status, _, data = http("/v1/chat/completions", body)
    assert status == 200, data
    return json.loads(data)["choices"][0]["message"]["content"]


# 1. headers and the key
for path in ["/", "/page.js", "/page.css", "/favicon.svg"]:
    status, headers, _ = http(path, auth=False)
    csp = headers.get("Content-Security-Policy", "")
    check(status == 200 and "default-src 'none'" in csp and "script-src 'self'" in csp, f"GET {path}: 200 with a Content-Security-Policy")
status, _, _ = http("/v1/chat/completions", {"messages": [{"role": "user", "content": "hi"}], "max_tokens": 4}, auth=False)
check(status == 401, f"the API without the key: {status}, want 401")

opts = webdriver.ChromeOptions()
opts.add_argument("--headless=new")
opts.add_argument("--no-sandbox")  # CI runs as root
opts.add_argument("--disable-gpu")
opts.add_argument("--window-size=1366,900")
opts.set_capability("goog:loggingPrefs", {"browser": "ALL"})
driver = webdriver.Chrome(options=opts)
driver.set_script_timeout(30)
el = lambda id_: driver.find_element(By.ID, id_)


def set_value(id_, value):
    e = el(id_)
    e.clear()
    e.send_keys(value)


def ask_and_wait(status_id="status", timeout=240):
    el("ask").click()
    WebDriverWait(driver, timeout, poll_frequency=0.1).until(
        lambda d: el(status_id).text == "done" or el(status_id).text.startswith("error") or el(status_id).text == "stopped")
    return el(status_id).text


try:
    driver.get(base + "/")
    check(driver.title.startswith("sdnpu"), f"page title: {driver.title!r}")
    el("settings").find_element(By.TAG_NAME, "summary").click()  # open the settings: the key field
    set_value("api-key", key)
    set_value("max-tokens", "48")

    # 2. a whole request: the lighthouse example
    Select(el("example")).select_by_index(2)  # option 0 is "your own document"
    document, question = el("document").get_property("value"), el("question").get_property("value")
    t0 = time.time()
    status = ask_and_wait()
    check(status == "done", f"#status reads done ({status!r}, {time.time() - t0:.1f} s)")
    shown = driver.execute_script("return document.getElementById('answer').textContent")
    want = api_answer(document, question, 48)
    check(shown == want, f"the page's answer equals the API's ({len(shown)} characters)")
    if shown != want:
        print("  page:", repr(shown), "\n  api: ", repr(want))
    accepted = driver.find_elements(By.CSS_SELECTOR, "#answer span.accepted")
    steps, tokens = int(el("steps").text), int(el("tokens").text)
    check(len(accepted) > 0, f"drafted tokens are marked: {len(accepted)} span.accepted")
    check(0 < steps < tokens, f"#steps {steps} < {tokens} tokens")
    print(f"     first answer: {tokens} tokens in {steps} steps, sources",
          {s: len(driver.find_elements(By.CSS_SELECTOR, f"#answer span.src-{s}")) for s in ["prompt", "answer", "history", "model"]})

    # 3. again: the task group's earlier answer is drafted from
    status = ask_and_wait()
    shown2 = driver.execute_script("return document.getElementById('answer').textContent")
    hist = driver.find_elements(By.CSS_SELECTOR, "#answer span.accepted.src-history")
    steps2 = int(el("steps").text)
    check(status == "done" and shown2 == want, "the repeat gives the same answer")
    check(len(hist) > 0 and steps2 < steps, f"the repeat drafts from the first answer: {len(hist)} history tokens, {steps2} steps (was {steps})")

    # 4. a document with script in it
    Select(el("example")).select_by_index(0)
    hostile = ('<script>window.__pwned = 1;</script><img src=x onerror="window.__pwned = 2">'
               '<b onmouseover="window.__pwned = 3">bold</b>\nThe code above is a test.')
    driver.execute_script("document.getElementById('document').value = arguments[0]", hostile)
    Select(el("task")).select_by_value("answer")
    set_value("question", "Repeat the first line of the document exactly.")
    status = ask_and_wait()
    shown3 = driver.execute_script("return document.getElementById('answer').textContent")
    want3 = api_answer(hostile, "Repeat the first line of the document exactly.", 48)
    check(status == "done" and shown3 == want3, "an answer about the hostile document equals the API's")
    print("     its answer:", repr(shown3[:100]))
    check(driver.execute_script("return window.__pwned === undefined"), "nothing in the document or the answer ran")
    check(len(driver.find_elements(By.CSS_SELECTOR, "#answer *:not(span)")) == 0, "the answer holds only text spans")
    check(el("document").get_property("value") == hostile, "the document is shown as text")
    # ... and an answer that surely holds markup: a schema whose one value is HTML and script
    html = '<img src=x onerror="window.__pwned = 4"><script>window.__pwned = 5;</script>'
    Select(el("task")).select_by_value("json")
    driver.execute_script("document.getElementById('schema').value = arguments[0]", json.dumps(
        {"type": "object", "properties": {"html": {"type": "string", "enum": [html]}}, "required": ["html"]}))
    status = ask_and_wait()
    shown4 = driver.execute_script("return document.getElementById('answer').textContent")
    check(status == "done" and json.loads(shown4) == {"html": html}, f"an answer holding markup is shown as text: {shown4[:60]!r}")
    check(len(driver.find_elements(By.CSS_SELECTOR, "#answer span.accepted.src-grammar")) > 0, "forced text is marked as the schema's")
    check(driver.execute_script("return window.__pwned === undefined") and
          len(driver.find_elements(By.CSS_SELECTOR, "#answer *:not(span)")) == 0, "and nothing in it ran")

    # 5. plain decoding side by side (the lighthouse once more: the task group has its answers)
    Select(el("example")).select_by_index(2)
    el("compare").click()
    status = ask_and_wait("plain-status", timeout=300)
    spec_text = driver.execute_script("return document.getElementById('answer').textContent")
    plain_text = driver.execute_script("return document.getElementById('plain-answer').textContent")
    verdict = el("verdict").text
    check(status == "done" and plain_text == spec_text and verdict.startswith("Same text."), f"plain vs speculative: {verdict}")
    check(all(el(i).text.endswith(" s") for i in ["time", "decode", "plain-time", "plain-decode"]), "both times shown")

    # 6. the prefix cache (the server's, on by default): the Gettysburg Address, another document,
    # the Gettysburg Address again; the slot's context last held the other one, so the speech's
    # blocks come from the cache, the answer is the same and the page says so
    el("compare").click()  # off again
    Select(el("example")).select_by_index(1)
    check(ask_and_wait() == "done", "the speech is answered")
    first = driver.execute_script("return document.getElementById('answer').textContent")
    check("from the prefix cache" not in el("prefill").text, f"a document read for the first time: {el('prefill').text!r}")
    Select(el("example")).select_by_index(2)
    check(ask_and_wait() == "done", "another document in between")
    Select(el("example")).select_by_index(1)
    check(ask_and_wait() == "done", "the speech again")
    again = driver.execute_script("return document.getElementById('answer').textContent")
    check(again == first, "the answer from the prefix cache is the same text")
    check("from the prefix cache" in el("prefill").text, f"the prefill line shows the prefix cache: {el('prefill').text!r}")

    if shots:
        el("settings").find_element(By.TAG_NAME, "summary").click()  # settings closed, as the page opens
        driver.execute_script("window.scrollTo(0, 0)")
        driver.set_window_size(1366, 900)
        time.sleep(0.3)
        driver.save_screenshot(shots + "/page-laptop.png")
        driver.execute_cdp_cmd("Emulation.setDeviceMetricsOverride", {"width": 390, "height": 844, "deviceScaleFactor": 2, "mobile": True})
        # the phone shot shows the answer: scroll to it
        driver.execute_script("document.querySelector('section.output').scrollIntoView()")
        time.sleep(0.3)
        driver.save_screenshot(shots + "/page-phone.png")
        driver.execute_cdp_cmd("Emulation.clearDeviceMetricsOverride", {})
        print("     screenshots in", shots)

    # 6. the console
    logs = driver.get_log("browser")
    errors = [l for l in logs if l.get("level") == "SEVERE"]
    for l in logs:
        print("     console:", l.get("level"), l.get("message", "")[:200])
    check(not errors, f"no errors in the browser console ({len(logs)} messages)")
finally:
    driver.quit()

if failures:
    print(f"test_page: {len(failures)} check(s) failed", file=sys.stderr)
    sys.exit(1)
print("test_page: passed")
