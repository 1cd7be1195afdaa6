"""The Python API against the sdnpu program and the C header: greedy output equals
`sdnpu run` byte for byte, streaming equals generate and cancels, errors raise sdnpu.Error
(never crash), the GIL is released, and the ctypes structs match include/sdnpu.h."""

from __future__ import annotations

import ctypes
import json
import shutil
import subprocess
import threading
import time
from pathlib import Path

import pytest

import sdnpu
from sdnpu import _ffi

from conftest import ROOT, need

DOC = ("The lighthouse on Gull Rock was built in 1871 by the harbour board. Its lamp burned whale oil until 1902, "
       "then kerosene, and since 1958 it has been electric. The keeper's cottage is now a small museum.")


def run_cli(exe: str, tmp: Path, args: list[str]) -> dict:
    stats = tmp / "stats.json"
    p = subprocess.run([exe, "run", "--model", "smollm2-135m-instruct", "--threads", "2", "--stats-json", str(stats), *args],
                       capture_output=True)
    assert p.returncode == 0, p.stderr.decode()
    j = json.loads(stats.read_text())
    return {"stdout": p.stdout, "passes": j}


def cli_pass(j: dict, method: str) -> dict:
    """The pass of `method` in `sdnpu run --stats-json`'s file ({"runs": [...]})."""
    runs = [r for r in j["passes"]["runs"] if r["method"] == method]
    assert runs, f"no {method} run in {j['passes']}"
    return runs[0]


@pytest.mark.parametrize("method", ["sdnpu", "none"])
def test_greedy_equals_sdnpu_run(smollm2: sdnpu.Model, exe: str, tmp_path: Path, method: str) -> None:
    doc = tmp_path / "doc.txt"
    doc.write_text(DOC)
    ctx = smollm2.context(n_ctx=2048, threads=2)
    cases = [
        (dict(prompt="When was the lighthouse built? Answer in one sentence."), ["--prompt", "When was the lighthouse built? Answer in one sentence."], []),
        (dict(prompt="Summarize the document.", documents=[DOC]), ["--prompt", "Summarize the document.", "--context", str(doc)], []),
        (dict(prompt="Name three colours.", system="You are terse."), ["--prompt", "Name three colours.", "--system", "You are terse."], []),
    ]
    for kw, args, _ in cases:
        r = ctx.generate(**kw, max_tokens=48, temperature=0.0, method=method)
        cli = run_cli(exe, tmp_path, [*args, "--max-tokens", "48", "--spec", method])
        p = cli_pass(cli, method)
        assert r.tokens == p["tokens"], kw
        assert r.raw_text == p["text"].encode(), kw
        out = cli["stdout"]  # the streamed text on stdout, byte for byte (then a newline)
        assert out[: len(r.raw_text)] == r.raw_text and out[len(r.raw_text):].strip() == b"", kw
        assert r.n_tokens == p["generated_tokens"]
        assert r.finish == p["finish"]
        if method == "none":  # sdnpu drafts from the model's candidate table, which this model learned on
            # the earlier cases and a fresh CLI process has not: the same tokens, not the same steps
            assert r.steps == p["steps"]
            assert abs(r.mean_accepted_tokens - p["mean_accepted_tokens"]) < 1e-9


def test_prefix_cache_across_models(exe: str, tmp_path: Path) -> None:
    """A second model (a restart) on the same prefix-cache directory prefills the document from
    disk; the answer is the bytes of a run without the cache and of `sdnpu run --prefix-cache`."""
    doc = " ".join([DOC] * 6)
    cache = tmp_path / "pcache"
    kw = dict(prompt="Summarize the document.", documents=[doc], max_tokens=32, temperature=0.0)
    plain = sdnpu.Model("smollm2-135m-instruct").context(n_ctx=2048, threads=2).generate(**kw)
    results = []
    for _ in range(2):
        with sdnpu.Model("smollm2-135m-instruct", prefix_cache_mb=64, prefix_cache_dir=cache) as m:
            results.append(m.context(n_ctx=2048, threads=2).generate(**kw))
            st = m.prefix_cache_stats()
            assert st["enabled"] == 1 and st["disk_enabled"] == 1
    first, second = results
    assert first.raw_text == plain.raw_text == second.raw_text and first.tokens == second.tokens
    assert first.prefix_disk_tokens == 0 and second.prefix_disk_tokens >= (plain.prompt_tokens - 1) // 64 * 64
    assert second.prefix_saved_s > 0
    with sdnpu.Model("smollm2-135m-instruct", prefix_cache_mb=64, prefix_cache_dir=cache) as m:
        out = m.context(n_ctx=2048, threads=2).generate(**kw, prefix_cache=False)
        assert out.raw_text == plain.raw_text and out.prefix_disk_tokens == 0 and m.prefix_cache_stats()["misses"] == 0
    docf = tmp_path / "doc.txt"
    docf.write_text(doc)
    p = cli_pass(run_cli(exe, tmp_path, ["--prompt", "Summarize the document.", "--context", str(docf), "--max-tokens", "32",
                                         "--spec", "sdnpu", "--prefix-cache", str(cache)]), "sdnpu")
    assert p["text"].encode() == plain.raw_text and p["prefix_disk_tokens"] == second.prefix_disk_tokens
    with pytest.raises(sdnpu.Error):
        sdnpu.Model("smollm2-135m-instruct", prefix_cache_mb=-1)


def test_json_schema_equals_sdnpu_run(smollm2: sdnpu.Model, exe: str, tmp_path: Path) -> None:
    schema = {"type": "object", "properties": {"year": {"type": "integer"}, "fuel": {"type": "string"}}, "required": ["year", "fuel"]}
    sf = tmp_path / "s.json"
    sf.write_text(json.dumps(schema))
    ctx = smollm2.context(n_ctx=2048, threads=2)
    r = ctx.generate(prompt="When was the lighthouse built and what does it burn today?", documents=[DOC], json_schema=schema,
                     max_tokens=64)
    doc = tmp_path / "doc.txt"
    doc.write_text(DOC)
    cli = run_cli(exe, tmp_path, ["--prompt", "When was the lighthouse built and what does it burn today?", "--context", str(doc),
                                  "--json-schema", str(sf), "--max-tokens", "64"])
    assert r.tokens == cli_pass(cli, "sdnpu")["tokens"]
    obj = json.loads(r.text)
    try:
        import jsonschema
    except ImportError:
        jsonschema = None
    if jsonschema is not None:
        jsonschema.validate(obj, schema)
    assert isinstance(obj["year"], int)


def test_messages_equal_prompt(smollm2: sdnpu.Model) -> None:
    """A one-user-turn conversation renders as the prompt request does (same template)."""
    ctx = smollm2.context(n_ctx=2048, threads=2)
    a = ctx.generate(messages=[{"role": "user", "content": "Say hello."}], max_tokens=24)
    b = ctx.generate(prompt="Say hello.", max_tokens=24)
    assert smollm2.render_prompt(messages=[{"role": "user", "content": "Say hello."}]) == smollm2.render_prompt("Say hello.")
    assert a.tokens == b.tokens and a.text == b.text


def test_stream_equals_generate_and_cancels(smollm2: sdnpu.Model) -> None:
    ctx = smollm2.context(n_ctx=2048, threads=2)
    whole = ctx.generate(prompt="Tell a short story about a cat.", max_tokens=40)
    s = ctx.stream(prompt="Tell a short story about a cat.", max_tokens=40)
    pieces = list(s)
    assert "".join(pieces) == whole.text and len(pieces) > 1
    assert s.result is not None and s.result.tokens == whole.tokens
    s2 = ctx.stream(prompt="Tell a long story about a dog.", max_tokens=200, ignore_eos=True)
    for i, _ in enumerate(s2):
        if i == 2:
            break
    s2.close()
    assert s2.result is not None and s2.result.finish == "cancelled" and s2.result.n_tokens < 200
    # a dropped stream cancels too, and the context takes the next request at once
    for i, _ in enumerate(ctx.stream(prompt="Count to one hundred.", max_tokens=200, ignore_eos=True)):
        break
    assert ctx.generate(prompt="Say hello.", max_tokens=8).n_tokens > 0


def test_on_text_cancel_and_exception(smollm2: sdnpu.Model) -> None:
    ctx = smollm2.context(n_ctx=1024, threads=2)
    got: list[str] = []
    r = ctx.generate(prompt="Count to fifty.", max_tokens=100, ignore_eos=True, on_text=lambda t: got.append(t) or len(got) >= 3)
    assert r.finish == "cancelled" and len(got) == 3

    def boom(_t: str) -> None:
        raise KeyError("from the callback")

    with pytest.raises(KeyError):
        ctx.generate(prompt="Say hello.", max_tokens=8, on_text=boom)
    assert ctx.generate(prompt="Say hello.", max_tokens=8).n_tokens > 0


def test_errors_never_crash(smollm2: sdnpu.Model, tmp_path: Path) -> None:
    with pytest.raises(sdnpu.Error) as e:
        sdnpu.Model(tmp_path / "missing.gguf")
    assert e.value.status == sdnpu.EIO and "missing.gguf" in e.value.message
    bad = tmp_path / "bad.gguf"
    bad.write_bytes(b"GGUF" + b"\0" * 60)
    with pytest.raises(sdnpu.Error) as e:
        sdnpu.Model(bad)
    assert e.value.status in (sdnpu.EFORMAT, sdnpu.EUNSUP)
    ctx = smollm2.context(n_ctx=512, threads=1)
    with pytest.raises(sdnpu.Error) as e:
        ctx.generate(prompt="x", json_schema="{not json")
    assert e.value.status == sdnpu.EINVAL and "json_schema" in e.value.message
    with pytest.raises(sdnpu.Error) as e:
        ctx.generate(prompt="x", json_schema={"type": "object", "properties": {"a": {"type": "nosuchtype"}}})
    assert e.value.status == sdnpu.EINVAL
    with pytest.raises(sdnpu.Error) as e:
        ctx.generate(prompt="x", method="nosuch")
    assert e.value.status == sdnpu.EINVAL and "nosuch" in e.value.message
    with pytest.raises(sdnpu.Error) as e:
        ctx.generate(prompt="x", history_scope="everything")
    assert e.value.status == sdnpu.EINVAL and "history_scope" in e.value.message
    with pytest.raises(sdnpu.Error) as e:
        ctx.generate(prompt="x", messages=[{"role": "user", "content": "y"}])
    assert e.value.status == sdnpu.EINVAL
    with pytest.raises(sdnpu.Error):
        ctx.generate(messages=[{"role": "user"}])
    with pytest.raises(sdnpu.Error):
        ctx.generate(prompt="x", max_tokens="many")
    with pytest.raises(sdnpu.Error):
        ctx.generate(prompt="x", no_such_argument=1)
    with pytest.raises(sdnpu.Error):
        ctx.generate(prompt="a\0b")
    with pytest.raises(sdnpu.Error) as e:
        ctx.generate(prompt="x " * 2000)  # longer than the 512-token context
    assert e.value.status == sdnpu.EINVAL
    assert ctx.generate(prompt="Say hi.", max_tokens=4).n_tokens > 0  # still usable
    # a closed model, and the contexts it closed
    m2 = sdnpu.Model(smollm2.info.path)
    c2 = m2.context(n_ctx=256, threads=1)
    m2.close()
    assert c2.closed
    for call in (lambda: c2.generate(prompt="x"), lambda: m2.context(), lambda: m2.info, lambda: m2.tokenize("x")):
        with pytest.raises(sdnpu.Error) as e:
            call()
        assert e.value.status == sdnpu.ESTATE
    m2.close()


def test_busy_context_is_refused(smollm2: sdnpu.Model) -> None:
    ctx = smollm2.context(n_ctx=1024, threads=2)
    started = threading.Event()
    errors: list[sdnpu.Error] = []

    def first() -> None:
        ctx.generate(prompt="Count to one hundred.", max_tokens=64, ignore_eos=True, on_text=lambda t: started.set())

    t = threading.Thread(target=first)
    t.start()
    started.wait(60)
    try:
        ctx.generate(prompt="Say hi.", max_tokens=4)
    except sdnpu.Error as e:
        errors.append(e)
    t.join()
    assert errors and errors[0].status == sdnpu.ESTATE


def test_gil_released(smollm2: sdnpu.Model) -> None:
    """Python threads run while the library computes: a counter thread advances during a
    generate call in another thread about as much as while idle."""
    ctx = smollm2.context(n_ctx=1024, threads=2)
    count = [0]
    stop = threading.Event()

    def spin() -> None:
        while not stop.is_set():
            count[0] += 1
            time.sleep(0.001)

    th = threading.Thread(target=spin)
    th.start()
    t0 = time.perf_counter()
    c0 = count[0]
    ctx.generate(prompt="Tell a story.", max_tokens=48, ignore_eos=True, method="none")
    dt = time.perf_counter() - t0
    ticks = count[0] - c0
    stop.set()
    th.join()
    assert dt > 0.05
    assert ticks >= 0.25 * dt / 0.0011, (ticks, dt)  # a held GIL would leave it near 0


def test_info_tokenize_and_lists(smollm2: sdnpu.Model) -> None:
    assert sdnpu.version() == "0.9.0"
    assert "smollm2-135m-instruct" in sdnpu.known_models()
    assert {"none", "pld", "sdnpu"} <= set(sdnpu.methods())
    info = smollm2.info
    assert info.architecture == "llama" and info.vocab == 49152 and len(info.fingerprint) == 16
    ids = smollm2.tokenize("Hello world", add_bos=False)
    assert smollm2.detokenize(ids) == "Hello world"
    ctx = smollm2.context(n_ctx=1000, threads=1)
    assert ctx.n_ctx == 1000
    r = ctx.generate(prompt_ids=smollm2.tokenize("Once upon a time"), max_tokens=8, method="none")
    assert r.n_tokens == 8 and r.finish == "length" and set(r.as_dict()) >= {"text", "steps", "mean_accepted_tokens", "accepted_hist"}


STRUCTS = {
    "sdnpu_error": (_ffi.CError, ["code", "message"]),
    "sdnpu_model_params": (_ffi.CModelParams, ["tokenizer_path"]),
    "sdnpu_model_info": (_ffi.CModelInfo, [f[0] for f in _ffi.CModelInfo._fields_]),
    "sdnpu_context_params": (_ffi.CContextParams, [f[0] for f in _ffi.CContextParams._fields_]),
    "sdnpu_message": (_ffi.CMessage, ["role", "content"]),
    "sdnpu_request": (_ffi.CRequest, [f[0] for f in _ffi.CRequest._fields_]),
    "sdnpu_stats": (_ffi.CStats, [f[0] for f in _ffi.CStats._fields_]),
    "sdnpu_result": (_ffi.CResult, [f[0] for f in _ffi.CResult._fields_]),
    "sdnpu_model_params": (_ffi.CModelParams, [f[0] for f in _ffi.CModelParams._fields_]),
    "sdnpu_prefix_cache_stats": (_ffi.CPrefixCacheStats, [f[0] for f in _ffi.CPrefixCacheStats._fields_]),
    "sdnpu_graph_params": (_ffi.CGraphParams, [f[0] for f in _ffi.CGraphParams._fields_]),
}


def test_struct_layout_matches_header(tmp_path: Path) -> None:
    """Every ctypes struct has the size and field offsets the C compiler gives the headers
    (sdnpu.h, and sdnpu_experimental.h for the graph parameters)."""
    header = ROOT / "include" / "sdnpu_experimental.h"
    cc = shutil.which("cc") or shutil.which("gcc")
    need(header.exists() and cc is not None, "no C compiler or include/sdnpu_experimental.h (a source checkout)")
    lines = ['#include <stdio.h>', '#include <stddef.h>', '#include "sdnpu.h"', '#include "sdnpu_experimental.h"', "int main(void) {"]
    for name, (_, fields) in STRUCTS.items():
        lines.append(f'printf("{name} %zu\\n", sizeof({name}));')
        for f in fields:
            lines.append(f'printf("{name}.{f} %zu\\n", offsetof({name}, {f}));')
    lines.append("return 0; }")
    src = tmp_path / "layout.c"
    src.write_text("\n".join(lines))
    subprocess.run([cc, "-I", str(header.parent), str(src), "-o", str(tmp_path / "layout")], check=True)
    out = subprocess.run([str(tmp_path / "layout")], capture_output=True, text=True, check=True).stdout
    c = dict(line.rsplit(" ", 1) for line in out.splitlines())
    for name, (cls, fields) in STRUCTS.items():
        assert int(c[name]) == ctypes.sizeof(cls), name
        for f in fields:
            assert int(c[f"{name}.{f}"]) == getattr(cls, f).offset, f"{name}.{f}"
