"""Models, contexts, requests and results: the Python face of libsdnpu's public API.

Every computation is the C library's (``sdnpu_generate`` and friends through ctypes, see
``_ffi``); this module only converts arguments and results. The GIL is released while the
library computes. As in C, a model may be shared by contexts in any threads, and a context
is used from one thread at a time (a second request on a busy context is refused with
``Error`` status ``ESTATE``).
"""

from __future__ import annotations

import ctypes
import json
import queue
import shutil
import subprocess
import threading
import weakref
from collections.abc import Callable, Iterator, Mapping, Sequence
from ctypes import POINTER, byref, c_char_p, c_int, c_int32, c_void_p
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Union

from . import _ffi

# sdnpu_status codes (sdnpu.h)
OK, EINVAL, EFORMAT, EIO, ENOMEM, EUNSUP, EDB, ESTATE = range(8)
_FINISH = ("stop", "length", "cancelled", "context")

PathLike = Union[str, Path]
Message = Mapping[str, str]


class Error(Exception):
    """An error of the library (or of this binding's argument checks).

    ``status`` is the library's ``sdnpu_status`` code (``sdnpu.EINVAL`` ...), ``status_name``
    its name ("invalid argument", ...), ``message`` the library's message naming the file,
    field or option at fault."""

    def __init__(self, status: int, message: str) -> None:
        self.status = int(status)
        self.message = message
        try:
            self.status_name = _ffi.lib().sdnpu_status_string(self.status).decode()
        except OSError:
            self.status_name = "error"
        super().__init__(f"{message} ({self.status_name})")


def _raise(rc: int, err: _ffi.CError) -> None:
    if rc != OK:
        msg = err.message.decode("utf-8", "replace") or _ffi.lib().sdnpu_status_string(rc).decode()
        raise Error(rc, msg)


def _b(s: str | PathLike | None, what: str) -> bytes | None:
    if s is None:
        return None
    if isinstance(s, Path):
        s = str(s)
    if not isinstance(s, str):
        raise Error(EINVAL, f"{what}: expected a string, got {type(s).__name__}")
    if "\0" in s:
        raise Error(EINVAL, f"{what}: contains a NUL character")
    return s.encode("utf-8")


def version() -> str:
    """The library's version ("0.9.0")."""
    return _ffi.lib().sdnpu_version().decode()


def known_models() -> list[str]:
    """Names of the models the library knows (loadable by name once in the cache)."""
    return [s.strip() for s in _ffi.lib().sdnpu_known_models().decode().split(",") if s.strip()]


def methods() -> list[str]:
    """Names of the drafting methods ("none" is plain decoding)."""
    return [s.strip() for s in _ffi.lib().sdnpu_methods().decode().split(",") if s.strip()]


def executable() -> str | None:
    """The ``sdnpu`` program used for what libsdnpu does not do (bench, study, pull):
    $SDNPU_EXE, else the copy inside this package (the wheel's ``sdnpu/_bin/sdnpu``), else
    ``sdnpu`` on PATH; None when there is none."""
    import os

    env = os.environ.get("SDNPU_EXE")
    if env:
        return env
    own = Path(__file__).resolve().parent / "_bin" / "sdnpu"
    if own.exists():
        return str(own)
    return shutil.which("sdnpu")


def pull(name: str, quiet: bool = True) -> str:
    """Download a known model into the cache (nothing when it is there and verified) and
    return its path. Uses ``sdnpu pull NAME`` (the program), or the library's
    ``sdnpu_model_pull`` while libsdnpu still has it and no program is found."""
    exe = executable()
    if exe:
        p = subprocess.run([exe, "pull", name], capture_output=True, text=True)
        if p.returncode != 0:
            msg = (p.stderr.strip().splitlines() or [f"sdnpu pull {name} failed"])[-1]
            raise Error(EIO if p.returncode != 2 else EINVAL, msg.removeprefix("sdnpu: "))
        return p.stdout.strip().splitlines()[-1]
    fn = _ffi.lib().optional("sdnpu_model_pull")
    if fn is None:
        raise Error(EUNSUP, f"cannot pull {name}: no `sdnpu` program found (set SDNPU_EXE) and the library has no sdnpu_model_pull")
    err = _ffi.CError()
    buf = ctypes.create_string_buffer(4096)
    _raise(fn(_b(name, "name"), int(quiet), buf, len(buf), byref(err)), err)  # type: ignore[operator]
    return buf.value.decode()


@dataclass
class ModelInfo:
    """What ``sdnpu_model_get_info`` says about a loaded model."""

    path: str
    architecture: str
    chat_template: str
    fingerprint: str
    n_layers: int
    dim: int
    n_heads: int
    n_kv_heads: int
    vocab: int
    context_length: int
    max_token_bytes: int
    weight_bytes: int
    tool_format: str


class Model:
    """A loaded model: a GGUF file, a llama2.c checkpoint (give ``tokenizer=`` its
    tokenizer.bin) or a known model's name ("smollm2-135m-instruct"), resolved in the model
    cache. ``pull=True`` downloads a known model missing from the cache first (``pull``).

    Weights are memory-mapped; a model is immutable and may be shared by contexts in any
    threads. ``close()`` (or leaving a ``with`` block) frees it and closes its contexts;
    using it afterwards raises ``Error`` (``ESTATE``).

    The prefix cache (off by default): ``prefix_cache_mb`` MiB in memory shared by the model's
    contexts, and with ``prefix_cache_dir`` a directory that later processes read too
    (``prefix_cache_disk_mb``, default 4096); a document's prefill is then done once. A
    request's ``prefix_cache=False`` opts out. Answers are the same bytes with or without it."""

    def __init__(
        self,
        path_or_name: PathLike,
        *,
        tokenizer: PathLike | None = None,
        pull: bool = False,
        prefix_cache_mb: int = 0,
        prefix_cache_dir: PathLike | None = None,
        prefix_cache_disk_mb: int = 0,
    ) -> None:
        self._h: int | None = None
        self._contexts: weakref.WeakSet[Context] = weakref.WeakSet()
        self._lock = threading.Lock()
        self.name = str(path_or_name)
        L = _ffi.lib()
        p = _ffi.CModelParams()
        L.sdnpu_model_params_init_sized(byref(p), ctypes.sizeof(p))
        tok = _b(tokenizer, "tokenizer")
        p.tokenizer_path = tok
        for name, v in (("prefix_cache_mb", prefix_cache_mb), ("prefix_cache_disk_mb", prefix_cache_disk_mb)):
            if not isinstance(v, int) or isinstance(v, bool) or v < 0 or v > 1 << 24:
                raise Error(EINVAL, f"{name}: expected an int in [0, {1 << 24}], got {v!r}")
        p.prefix_cache_bytes = prefix_cache_mb << 20
        pdir = _b(prefix_cache_dir, "prefix_cache_dir")
        p.prefix_cache_dir = pdir
        p.prefix_cache_disk_bytes = prefix_cache_disk_mb << 20
        h = c_void_p()
        err = _ffi.CError()
        rc = L.sdnpu_model_load(_b(path_or_name, "model"), byref(p), byref(h), byref(err))
        if rc == EIO and pull and self.name in known_models():
            pull_fn = globals()["pull"]
            pull_fn(self.name)
            rc = L.sdnpu_model_load(_b(path_or_name, "model"), byref(p), byref(h), byref(err))
        _raise(rc, err)
        self._h = h.value

    # -- state
    def _handle(self) -> int:
        if self._h is None:
            raise Error(ESTATE, f"model {self.name} is closed")
        return self._h

    def prefix_cache_stats(self) -> dict[str, int]:
        """The prefix cache's counters since the model was loaded (``sdnpu_prefix_cache_stats``):
        ``enabled``, ``disk_enabled``, ``hits_memory``, ``hits_disk``, ``misses`` (blocks of 64
        prompt tokens), ``evictions``, ``disk_evictions``, ``disk_writes``, ``disk_damaged``,
        ``memory_blocks``, ``memory_bytes``, ``memory_budget``, ``disk_bytes``, ``disk_budget``."""
        L = _ffi.lib()
        st = _ffi.CPrefixCacheStats()
        L.sdnpu_prefix_cache_stats_init_sized(byref(st), ctypes.sizeof(st))
        err = _ffi.CError()
        _raise(L.sdnpu_prefix_cache_get_stats(self._handle(), byref(st), byref(err)), err)
        return {f: int(getattr(st, f)) for f, _ in _ffi.CPrefixCacheStats._fields_ if f != "struct_size"}

    @property
    def closed(self) -> bool:
        return self._h is None

    def close(self) -> None:
        """Free the model, closing its contexts first (harmless when already closed)."""
        with self._lock:
            for c in list(self._contexts):
                c.close()
            if self._h is not None:
                _ffi.lib().sdnpu_model_free(self._h)
                self._h = None

    def __enter__(self) -> Model:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __del__(self) -> None:
        try:
            self.close()
        except Exception:
            pass

    def __repr__(self) -> str:
        return f"sdnpu.Model({self.name!r}{', closed' if self.closed else ''})"

    # -- queries
    @property
    def info(self) -> ModelInfo:
        """Architecture, shapes, chat template family, fingerprint (``ModelInfo``)."""
        L = _ffi.lib()
        i = _ffi.CModelInfo()
        L.sdnpu_model_info_init_sized(byref(i), ctypes.sizeof(i))
        err = _ffi.CError()
        _raise(L.sdnpu_model_get_info(self._handle(), byref(i), byref(err)), err)

        def s(v: bytes | None) -> str:
            return v.decode("utf-8", "replace") if v else ""

        return ModelInfo(s(i.path), s(i.architecture), s(i.chat_template), s(i.fingerprint), i.n_layers, i.dim, i.n_heads,
                         i.n_kv_heads, i.vocab, i.context_length, i.max_token_bytes, int(i.weight_bytes), s(i.tool_format))

    @property
    def has_tokenizer(self) -> bool:
        return bool(_ffi.lib().sdnpu_model_has_tokenizer(self._handle()))

    def describe(self, n_ctx: int = 0) -> str:
        """A human-readable description (shapes, tensor types, KV cache memory for n_ctx)."""
        L = _ffi.lib()
        p = L.sdnpu_model_describe(self._handle(), int(n_ctx))
        if not p:
            raise Error(ENOMEM, "sdnpu_model_describe failed")
        try:
            return ctypes.string_at(p).decode("utf-8", "replace")
        finally:
            L.sdnpu_free(p)

    def tokenize(self, text: str, *, add_bos: bool = True, parse_special: bool = False) -> list[int]:
        """Token ids of text with the model's own tokenizer."""
        L = _ffi.lib()
        data = _b(text, "text") or b""
        ids = POINTER(c_int32)()
        n = c_int()
        err = _ffi.CError()
        _raise(L.sdnpu_tokenize(self._handle(), data, len(data), int(add_bos), int(parse_special), byref(ids), byref(n), byref(err)), err)
        try:
            return [ids[i] for i in range(n.value)]
        finally:
            L.sdnpu_free(ids)

    def detokenize(self, ids: Sequence[int]) -> str:
        """Text of token ids (control tokens not rendered)."""
        L = _ffi.lib()
        arr = (c_int32 * len(ids))(*ids)
        out = c_void_p()
        err = _ffi.CError()
        _raise(L.sdnpu_detokenize(self._handle(), arr, len(ids), byref(out), byref(err)), err)
        try:
            return ctypes.string_at(out.value or 0).decode("utf-8", "replace")
        finally:
            L.sdnpu_free(out)

    def render_prompt(self, prompt: str | None = None, **request: Any) -> str:
        """The prompt exactly as the model sees it (chat template applied); takes the
        request arguments of ``Context.generate``."""
        req = _Request(prompt=prompt, **request)
        out = c_void_p()
        err = _ffi.CError()
        _raise(_ffi.lib().sdnpu_render_prompt(self._handle(), byref(req.c), byref(out), byref(err)), err)
        try:
            return ctypes.string_at(out.value or 0).decode("utf-8", "replace")
        finally:
            _ffi.lib().sdnpu_free(out)

    def context(self, n_ctx: int = 0, threads: int = 0, **kw: Any) -> Context:
        """A new context on this model (see ``Context``)."""
        return Context(self, n_ctx=n_ctx, threads=threads, **kw)


@dataclass
class Result:
    """One request's answer and statistics (``sdnpu_result`` with its ``sdnpu_stats``).

    ``accepted_hist[k]`` counts the decode steps that accepted k draft tokens (trailing zeros
    dropped). Times are seconds. ``as_dict()`` gives a flat record for pandas."""

    text: str
    tokens: list[int]
    finish: str  # "stop", "length", "cancelled", "context"
    stop_index: int
    prompt_tokens: int
    reused_tokens: int
    generated_tokens: int
    steps: int
    drafted_tokens: int
    accepted_tokens: int
    mean_accepted_tokens: float
    accepted_hist: list[int]
    prefill_s: float
    decode_s: float
    draft_s: float
    verify_s: float
    first_token_s: float
    history_answers: int
    history_tokens: int
    answer_stored: bool
    peak_rss: int
    forced_tokens: int
    constrain_s: float
    prefix_memory_tokens: int = 0
    prefix_disk_tokens: int = 0
    prefix_saved_s: float = 0.0
    raw_text: bytes = field(repr=False, default=b"")

    @property
    def n_tokens(self) -> int:
        return len(self.tokens)

    @property
    def mean_accepted(self) -> float:
        return self.mean_accepted_tokens

    @property
    def ms_per_token(self) -> float:
        """Decode milliseconds per generated token (0 when none)."""
        return 1000.0 * self.decode_s / self.generated_tokens if self.generated_tokens else 0.0

    def as_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d.pop("raw_text")
        d["n_tokens"] = self.n_tokens
        return d

    @classmethod
    def _from_c(cls, r: _ffi.CResult) -> Result:
        s = r.stats
        raw = ctypes.string_at(r.text) if r.text else b""
        hist = list(s.accepted_hist)
        while hist and hist[-1] == 0:
            hist.pop()
        return cls(
            text=raw.decode("utf-8", "replace"), tokens=[r.tokens[i] for i in range(r.n_tokens)],
            finish=_FINISH[r.finish] if 0 <= r.finish < len(_FINISH) else str(r.finish), stop_index=r.stop_index,
            prompt_tokens=s.prompt_tokens, reused_tokens=s.reused_tokens, generated_tokens=s.generated_tokens, steps=s.steps,
            drafted_tokens=s.drafted_tokens, accepted_tokens=s.accepted_tokens, mean_accepted_tokens=s.mean_accepted,
            accepted_hist=hist, prefill_s=s.prefill_s, decode_s=s.decode_s, draft_s=s.draft_s, verify_s=s.verify_s,
            first_token_s=s.first_token_s, history_answers=s.history_answers, history_tokens=s.history_tokens,
            answer_stored=bool(s.answer_stored), peak_rss=s.peak_rss, forced_tokens=s.forced_tokens, constrain_s=s.constrain_s,
            prefix_memory_tokens=s.prefix_memory_tokens, prefix_disk_tokens=s.prefix_disk_tokens, prefix_saved_s=s.prefix_saved_s,
            raw_text=raw,
        )


def _strings(v: Sequence[str] | None, what: str) -> tuple[Any, int]:
    if v is None:
        return None, 0
    if isinstance(v, (str, bytes)):
        raise Error(EINVAL, f"{what}: expected a list of strings, got one string")
    arr = (c_char_p * len(v))(*[_b(s, f"{what}[{i}]") for i, s in enumerate(v)])
    return arr, len(v)


class _Request:
    """An sdnpu_request filled from keyword arguments; keeps its buffers alive."""

    _INTS = ("draft_max", "draft_depth", "draft_branch", "prefill_topk", "max_tokens", "top_k", "seed", "repeat_last_n")
    _FLOATS = ("temperature", "top_p", "min_p", "repeat_penalty")
    _STRS = ("system", "chat_template", "task_group", "history_scope", "method", "grammar")
    _BOOLS = ("store_answer", "ignore_eos", "reuse_kv", "prefix_cache")

    def __init__(self, prompt: str | None = None, *, messages: Sequence[Message] | None = None,
                 documents: Sequence[str] | None = None, prompt_ids: Sequence[int] | None = None,
                 params: Mapping[str, Any] | Sequence[str] | None = None, stop: Sequence[str] | None = None,
                 json_schema: Mapping[str, Any] | str | None = None, **kw: Any) -> None:
        self.c = c = _ffi.CRequest()
        _ffi.lib().sdnpu_request_init_sized(byref(c), ctypes.sizeof(c))
        self.keep: list[Any] = []
        if prompt is not None:
            c.prompt = _b(prompt, "prompt")
        if messages is not None:
            if isinstance(messages, (str, bytes)) or not isinstance(messages, Sequence):
                raise Error(EINVAL, "messages: expected a list of {'role': ..., 'content': ...} dicts")
            arr = (_ffi.CMessage * len(messages))()
            for i, m in enumerate(messages):
                if not isinstance(m, Mapping) or "role" not in m or "content" not in m:
                    raise Error(EINVAL, f"messages[{i}]: expected a dict with 'role' and 'content'")
                arr[i].role = _b(m["role"], f"messages[{i}].role")
                arr[i].content = _b(m["content"], f"messages[{i}].content")
            c.messages = ctypes.cast(arr, POINTER(_ffi.CMessage))
            c.n_messages = len(messages)
            self.keep.append(arr)
        if documents is not None:
            arr, n = _strings(documents, "documents")
            c.documents, c.n_documents = arr, n
            self.keep.append(arr)
        if prompt_ids is not None:
            ids = (c_int32 * len(prompt_ids))(*prompt_ids)
            c.prompt_ids, c.n_prompt_ids = ids, len(prompt_ids)
            self.keep.append(ids)
        if params is not None:
            plist = [f"{k}={v}" for k, v in params.items()] if isinstance(params, Mapping) else list(params)
            arr, n = _strings(plist, "params")
            c.params, c.n_params = arr, n
            self.keep.append(arr)
        if stop is not None:
            arr, n = _strings(stop, "stop")
            c.stop, c.n_stop = arr, n
            self.keep.append(arr)
        if json_schema is not None:
            text = json_schema if isinstance(json_schema, str) else json.dumps(json_schema)
            c.json_schema = _b(text, "json_schema")
        for k, v in kw.items():
            if v is None:
                continue
            if k in self._INTS:
                if not isinstance(v, int) or isinstance(v, bool):
                    raise Error(EINVAL, f"{k}: expected an integer, got {v!r}")
                if k == "seed" and v < 0:
                    raise Error(EINVAL, f"seed: must be >= 0, got {v}")
                if k != "seed" and not -(2**31) <= v < 2**31:
                    raise Error(EINVAL, f"{k}: {v} is out of range")
                setattr(c, k, v)
            elif k in self._FLOATS:
                if not isinstance(v, (int, float)) or isinstance(v, bool):
                    raise Error(EINVAL, f"{k}: expected a number, got {v!r}")
                setattr(c, k, float(v))
            elif k in self._STRS:
                setattr(c, k, _b(v, k))
            elif k in self._BOOLS:
                setattr(c, k, int(bool(v)))
            else:
                raise Error(EINVAL, f"unknown request argument {k!r}")


class Context:
    """A context: a KV cache and worker threads on a model, running one request at a time.

    ``n_ctx``: KV cache size in tokens (0: min(trained length, 8192)); ``threads``: compute
    threads (0: the library's default); ``history``: an SQLite history store of earlier
    answers per task group; ``cache_type_k``/``cache_type_v``: "f16", "f32", "q8" or "bf16";
    ``graphs``: a graph mode ("single", "sync", "async", "progressive", "optimal"; experimental:
    sdnpu_context_new_graphs of sdnpu_experimental.h, the other graph settings at their defaults).
    A context keeps the KV entries of its previous request for a common prefix."""

    def __init__(self, model: Model, *, n_ctx: int = 0, threads: int = 0, history: PathLike | None = None,
                 cache_type_k: str | None = None, cache_type_v: str | None = None, graphs: str | None = None) -> None:
        self._h: int | None = None
        self.model = model
        self._lock = threading.Lock()
        L = _ffi.lib()
        p = _ffi.CContextParams()
        L.sdnpu_context_params_init_sized(byref(p), ctypes.sizeof(p))
        if n_ctx:
            p.n_ctx = int(n_ctx)
        if threads:
            p.n_threads = int(threads)
        keep = [_b(history, "history"), _b(cache_type_k, "cache_type_k"), _b(cache_type_v, "cache_type_v")]
        p.history_path, p.cache_type_k, p.cache_type_v = keep
        g = None
        if graphs is not None:
            g = _ffi.CGraphParams()
            L.sdnpu_graph_params_init_sized(byref(g), ctypes.sizeof(g))
            g.graphs = _b(graphs, "graphs")
        h = c_void_p()
        err = _ffi.CError()
        with model._lock:
            if g is None:
                rc = L.sdnpu_context_new(model._handle(), byref(p), byref(h), byref(err))
            else:
                rc = L.sdnpu_context_new_graphs(model._handle(), byref(p), byref(g), byref(h), byref(err))
            _raise(rc, err)
            self._h = h.value
            model._contexts.add(self)

    @property
    def closed(self) -> bool:
        return self._h is None

    @property
    def n_ctx(self) -> int:
        """KV cache size in tokens (the most prompt plus answer can hold)."""
        return int(_ffi.lib().sdnpu_context_n_ctx(self._handle()))

    def _handle(self) -> int:
        if self._h is None:
            raise Error(ESTATE, "context is closed")
        return self._h

    def close(self) -> None:
        """Free the context (waits for a request running in another thread)."""
        with self._lock:
            if self._h is not None:
                _ffi.lib().sdnpu_context_free(self._h)
                self._h = None

    def __enter__(self) -> Context:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __del__(self) -> None:
        try:
            self.close()
        except Exception:
            pass

    def generate(self, prompt: str | None = None, *, on_text: Callable[[str], Any] | None = None,
                 on_progress: Callable[[int, int], Any] | None = None, **request: Any) -> Result:
        """Run one request and return its ``Result``.

        What the model sees, exactly one of: ``prompt`` (with optional ``documents``, a list
        of strings, and ``system``), ``messages`` (a list of {"role", "content"} dicts,
        rendered with the chat template) or ``prompt_ids``. Other arguments, named as the
        fields of sdnpu_request: ``method`` ("sdnpu" default, "none" = plain decoding, see
        ``sdnpu.methods()``), ``max_tokens``, ``temperature`` (0: greedy), ``top_p``,
        ``top_k``, ``min_p``, ``seed``, ``repeat_penalty``, ``repeat_last_n``, ``stop`` (a
        list), ``ignore_eos``, ``draft_max``/``draft_depth``/``draft_branch``, ``params``
        (a dict or "KEY=VALUE" list), ``prefill_topk``, ``chat_template``, ``task_group``,
        ``history_scope`` ("group" or "global"),
        ``store_answer``, ``reuse_kv``, ``prefix_cache`` (the model's prefix cache, default True), ``grammar`` (GBNF text), ``json_schema`` (a dict or
        JSON text). ``on_text(piece)`` receives the text as it is committed; returning True
        cancels. ``on_progress(done, total)`` reports prefill. Errors raise ``Error``."""
        return self._run(prompt, on_text, on_progress, request, None)

    def stream(self, prompt: str | None = None, **request: Any) -> Stream:
        """Run a request and iterate over its text as it is committed (str pieces).

        Takes ``generate``'s arguments. Breaking out of the loop (or ``close()``, or leaving
        a ``with`` block) cancels the request; afterwards ``.result`` holds the ``Result``
        (finish "cancelled" when it was cut short)."""
        return Stream(self, prompt, request)

    def _run(self, prompt: str | None, on_text: Callable[[str], Any] | None, on_progress: Callable[[int, int], Any] | None,
             request: dict[str, Any], cancel: threading.Event | None) -> Result:
        req = _Request(prompt=prompt, **request)
        failure: list[BaseException] = []

        def text_cb(_ud: int | None, ptr: int | None, n: int) -> int:
            if cancel is not None and cancel.is_set():
                return 1
            if on_text is None:
                return 0
            try:
                return 1 if on_text(ctypes.string_at(ptr or 0, n).decode("utf-8", "replace")) else 0
            except BaseException as e:  # raised again after the call; the request stops
                failure.append(e)
                return 1

        def progress_cb(_ud: int | None, done: int, total: int) -> None:
            if on_progress is None or failure:
                return
            try:
                on_progress(done, total)
            except BaseException as e:
                failure.append(e)

        cb = _ffi.TEXT_CB(text_cb)
        req.c.on_text = cb
        pcb = _ffi.PROGRESS_CB(progress_cb) if on_progress is not None else None
        if pcb is not None:
            req.c.on_progress = pcb
        res = _ffi.CResult()
        L = _ffi.lib()
        L.sdnpu_result_init_sized(byref(res), ctypes.sizeof(res))
        err = _ffi.CError()
        if not self._lock.acquire(blocking=False):
            raise Error(ESTATE, "context is running a request (use one context per thread)")
        try:
            rc = L.sdnpu_generate(self._handle(), byref(req.c), byref(res), byref(err))
            try:
                if failure:
                    raise failure[0]
                _raise(rc, err)
                return Result._from_c(res)
            finally:
                L.sdnpu_result_free(byref(res))
        finally:
            self._lock.release()


class Stream:
    """Iterator over a request's text pieces (see ``Context.stream``). The library runs the
    request in a worker thread; pieces pass through a queue. ``result`` is set once the
    request has ended; ``close()`` cancels it and waits."""

    _END = object()

    def __init__(self, ctx: Context, prompt: str | None, request: dict[str, Any]) -> None:
        self.result: Result | None = None
        self._q: queue.Queue[Any] = queue.Queue()
        self._cancel = threading.Event()
        self._box: dict[str, Any] = {}
        q, box, cancel = self._q, self._box, self._cancel

        def work() -> None:  # holds no reference to the Stream, so dropping it cancels
            try:
                box["result"] = ctx._run(prompt, q.put, None, request, cancel)
            except BaseException as e:
                box["error"] = e
            q.put(Stream._END)

        ctx._handle()
        self._thread = threading.Thread(target=work, name="sdnpu-stream", daemon=True)
        self._thread.start()
        self._done = False

    def __iter__(self) -> Iterator[str]:
        return self

    def __next__(self) -> str:
        if self._done:
            raise StopIteration
        item = self._q.get()
        if item is Stream._END:
            self._finish()
            raise StopIteration
        return item  # type: ignore[no-any-return]

    def _finish(self) -> None:
        self._done = True
        self._thread.join()
        self.result = self._box.get("result")
        if "error" in self._box:
            e = self._box.pop("error")
            raise e

    def close(self) -> None:
        """Cancel the request (when still running) and wait for it to stop."""
        if self._done:
            return
        self._cancel.set()
        self._finish()

    @property
    def text(self) -> str:
        """The whole answer (after the stream has ended)."""
        return self.result.text if self.result else ""

    def __enter__(self) -> Stream:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __del__(self) -> None:
        try:
            self.close()
        except BaseException:
            pass
