"""ctypes declarations of include/sdnpu.h (libsdnpu's public API), of what the package uses of
include/sdnpu_experimental.h (graph contexts), and the loading of the library.

Only this module knows the C layout. Every struct the library reads or writes carries its
size (``struct_size``), set here with the library's ``*_init_sized`` functions and
``ctypes.sizeof``, so the library checks our layout against its own (see sdnpu.h, "ABI").
ctypes releases the GIL during every foreign call, so the library computes while other
Python threads run.
"""

from __future__ import annotations

import ctypes
import os
from ctypes import (
    CFUNCTYPE,
    POINTER,
    Structure,
    c_char,
    c_char_p,
    c_double,
    c_float,
    c_int,
    c_int32,
    c_long,
    c_size_t,
    c_uint64,
    c_void_p,
    byref,
)
from pathlib import Path
from typing import Any

ACCEPT_HIST = 65  # SDNPU_ACCEPT_HIST


class CError(Structure):
    _fields_ = [("code", c_int), ("message", c_char * 1024)]


class CModelParams(Structure):
    _fields_ = [
        ("struct_size", c_size_t),
        ("tokenizer_path", c_char_p),
        ("prefix_cache_bytes", c_uint64),
        ("prefix_cache_dir", c_char_p),
        ("prefix_cache_disk_bytes", c_uint64),
    ]


class CPrefixCacheStats(Structure):
    _fields_ = [
        ("struct_size", c_size_t),
        ("enabled", c_int),
        ("disk_enabled", c_int),
        ("hits_memory", c_long),
        ("hits_disk", c_long),
        ("misses", c_long),
        ("evictions", c_long),
        ("disk_evictions", c_long),
        ("disk_writes", c_long),
        ("disk_damaged", c_long),
        ("memory_blocks", c_long),
        ("memory_bytes", c_uint64),
        ("memory_budget", c_uint64),
        ("disk_bytes", c_uint64),
        ("disk_budget", c_uint64),
    ]


class CModelInfo(Structure):
    _fields_ = [
        ("struct_size", c_size_t),
        ("path", c_char_p),
        ("architecture", c_char_p),
        ("chat_template", c_char_p),
        ("fingerprint", c_char * 17),
        ("n_layers", c_int),
        ("dim", c_int),
        ("n_heads", c_int),
        ("n_kv_heads", c_int),
        ("vocab", c_int),
        ("context_length", c_int),
        ("max_token_bytes", c_int),
        ("weight_bytes", c_uint64),
        ("tool_format", c_char_p),
    ]


class CContextParams(Structure):
    _fields_ = [
        ("struct_size", c_size_t),
        ("n_ctx", c_int),
        ("n_threads", c_int),
        ("history_path", c_char_p),
        ("cache_type_k", c_char_p),
        ("cache_type_v", c_char_p),
    ]


class CGraphParams(Structure):  # sdnpu_experimental.h
    _fields_ = [
        ("struct_size", c_size_t),
        ("graphs", c_char_p),
        ("profile_db", c_char_p),
        ("graph_blocks", c_int),
        ("g1", c_int),
        ("g2", c_int),
        ("graph_pin", c_int),
    ]


class CMessage(Structure):
    _fields_ = [("role", c_char_p), ("content", c_char_p)]


TEXT_CB = CFUNCTYPE(c_int, c_void_p, c_void_p, c_size_t)
PROGRESS_CB = CFUNCTYPE(None, c_void_p, c_int, c_int)


class CRequest(Structure):
    _fields_ = [
        ("struct_size", c_size_t),
        ("messages", POINTER(CMessage)),
        ("n_messages", c_int),
        ("prompt", c_char_p),
        ("documents", POINTER(c_char_p)),
        ("n_documents", c_int),
        ("system", c_char_p),
        ("chat_template", c_char_p),
        ("prompt_ids", POINTER(c_int32)),
        ("n_prompt_ids", c_int),
        ("task_group", c_char_p),
        ("store_answer", c_int),
        ("method", c_char_p),
        ("draft_max", c_int),
        ("draft_depth", c_int),
        ("draft_branch", c_int),
        ("params", POINTER(c_char_p)),
        ("n_params", c_int),
        ("prefill_topk", c_int),
        ("max_tokens", c_int),
        ("temperature", c_float),
        ("top_p", c_float),
        ("top_k", c_int),
        ("seed", c_uint64),
        ("ignore_eos", c_int),
        ("stop", POINTER(c_char_p)),
        ("n_stop", c_int),
        ("reuse_kv", c_int),
        ("on_text", TEXT_CB),
        ("user_data", c_void_p),
        ("on_progress", PROGRESS_CB),
        ("min_p", c_float),
        ("repeat_penalty", c_float),
        ("repeat_last_n", c_int),
        ("grammar", c_char_p),
        ("json_schema", c_char_p),
        ("on_step", c_void_p),  # int (*)(void *, const sdnpu_step *): not used by the package (NULL)
        ("history_scope", c_char_p),
        ("prefix_cache", c_int),
        ("reserved0", c_int),
    ]


class CStats(Structure):
    _fields_ = [
        ("prompt_tokens", c_int),
        ("reused_tokens", c_int),
        ("generated_tokens", c_int),
        ("steps", c_int),
        ("drafted_tokens", c_long),
        ("accepted_tokens", c_long),
        ("mean_accepted", c_double),
        ("accepted_hist", c_int * ACCEPT_HIST),
        ("prefill_s", c_double),
        ("decode_s", c_double),
        ("draft_s", c_double),
        ("verify_s", c_double),
        ("first_token_s", c_double),
        ("history_answers", c_int),
        ("history_tokens", c_long),
        ("answer_stored", c_int),
        ("peak_rss", c_size_t),
        ("forced_tokens", c_long),
        ("constrain_s", c_double),
        ("prefix_memory_tokens", c_int),
        ("prefix_disk_tokens", c_int),
        ("prefix_saved_s", c_double),
    ]


class CResult(Structure):
    _fields_ = [
        ("struct_size", c_size_t),
        ("text", c_void_p),
        ("tokens", POINTER(c_int32)),
        ("n_tokens", c_int),
        ("finish", c_int),
        ("stop_index", c_int),
        ("stats", CStats),
    ]


# name: (restype, argtypes)
_SIGNATURES: dict[str, tuple[object, list[object]]] = {
    "sdnpu_version": (c_char_p, []),
    "sdnpu_set_cache_dir": (c_int, [c_char_p, POINTER(CError)]),
    "sdnpu_status_string": (c_char_p, [c_int]),
    "sdnpu_free": (None, [c_void_p]),
    "sdnpu_model_params_init_sized": (c_int, [POINTER(CModelParams), c_size_t]),
    "sdnpu_model_load": (c_int, [c_char_p, POINTER(CModelParams), POINTER(c_void_p), POINTER(CError)]),
    "sdnpu_model_free": (None, [c_void_p]),
    "sdnpu_known_models": (c_char_p, []),
    "sdnpu_model_info_init_sized": (c_int, [POINTER(CModelInfo), c_size_t]),
    "sdnpu_model_has_tokenizer": (c_int, [c_void_p]),
    "sdnpu_model_get_info": (c_int, [c_void_p, POINTER(CModelInfo), POINTER(CError)]),
    "sdnpu_model_describe": (c_void_p, [c_void_p, c_int]),
    "sdnpu_prefix_cache_stats_init_sized": (c_int, [POINTER(CPrefixCacheStats), c_size_t]),
    "sdnpu_prefix_cache_get_stats": (c_int, [c_void_p, POINTER(CPrefixCacheStats), POINTER(CError)]),
    "sdnpu_tokenize": (
        c_int,
        [c_void_p, c_char_p, c_size_t, c_int, c_int, POINTER(POINTER(c_int32)), POINTER(c_int), POINTER(CError)],
    ),
    "sdnpu_detokenize": (c_int, [c_void_p, POINTER(c_int32), c_int, POINTER(c_void_p), POINTER(CError)]),
    "sdnpu_context_params_init_sized": (c_int, [POINTER(CContextParams), c_size_t]),
    "sdnpu_context_new": (c_int, [c_void_p, POINTER(CContextParams), POINTER(c_void_p), POINTER(CError)]),
    "sdnpu_graph_params_init_sized": (c_int, [POINTER(CGraphParams), c_size_t]),
    "sdnpu_context_new_graphs": (
        c_int,
        [c_void_p, POINTER(CContextParams), POINTER(CGraphParams), POINTER(c_void_p), POINTER(CError)],
    ),
    "sdnpu_context_free": (None, [c_void_p]),
    "sdnpu_context_n_ctx": (c_int, [c_void_p]),
    "sdnpu_methods": (c_char_p, []),
    "sdnpu_check_method": (c_int, [c_char_p, POINTER(CError)]),
    "sdnpu_check_param": (c_int, [c_char_p, POINTER(CError)]),
    "sdnpu_request_init_sized": (c_int, [POINTER(CRequest), c_size_t]),
    "sdnpu_result_init_sized": (c_int, [POINTER(CResult), c_size_t]),
    "sdnpu_generate": (c_int, [c_void_p, POINTER(CRequest), POINTER(CResult), POINTER(CError)]),
    "sdnpu_result_free": (None, [POINTER(CResult)]),
    "sdnpu_render_prompt": (c_int, [c_void_p, POINTER(CRequest), POINTER(c_void_p), POINTER(CError)]),
}
# Present in libsdnpu 0.7 but due to leave the library (the download moves to the command
# line); looked up when present, never required.
_OPTIONAL = {
    "sdnpu_model_pull": (c_int, [c_char_p, c_int, c_char_p, c_size_t, POINTER(CError)]),
}


def library_path() -> Path:
    """Where libsdnpu is loaded from: $SDNPU_LIBRARY, else the copy inside this package
    (the wheel's ``sdnpu/_lib/libsdnpu.so``)."""
    env = os.environ.get("SDNPU_LIBRARY")
    if env:
        return Path(env)
    return Path(__file__).resolve().parent / "_lib" / "libsdnpu.so"


class _Lib:
    """The loaded library with typed functions; ``optional(name)`` is None when absent."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.dll = ctypes.CDLL(str(path))
        for name, (res, args) in _SIGNATURES.items():
            fn = getattr(self.dll, name)
            fn.restype = res
            fn.argtypes = args
            setattr(self, name, fn)
        self._optional: dict[str, object] = {}
        for name, (res, args) in _OPTIONAL.items():
            fn = getattr(self.dll, name, None)
            if fn is not None:
                fn.restype = res
                fn.argtypes = args
            self._optional[name] = fn

    def optional(self, name: str) -> Any:
        return self._optional.get(name)

    def __getattr__(self, name: str) -> Any:  # the typed functions set in __init__
        raise AttributeError(f"libsdnpu has no function {name}")


_lib: _Lib | None = None


def lib() -> _Lib:
    """The library, loaded on first use (an OSError names the path when it cannot be)."""
    global _lib
    if _lib is None:
        path = library_path()
        if not path.exists():
            raise OSError(
                f"libsdnpu not found at {path}: install the sdnpu wheel (pip install .), "
                "or set SDNPU_LIBRARY to a built build/libsdnpu.so"
            )
        _lib = _Lib(path)
        _set_cache_dir(_lib)
    return _lib


def cache_dir() -> str:
    """The model cache directory the package gives the library (libsdnpu reads no environment
    itself): $SDNPU_CACHE, else $XDG_CACHE_HOME/sdnpu, else ~/.cache/sdnpu - the rule of the
    ``sdnpu`` program, so both find the same cached models."""
    e, x, h = os.environ.get("SDNPU_CACHE"), os.environ.get("XDG_CACHE_HOME"), os.environ.get("HOME")
    if e:
        return e
    if x:
        return os.path.join(x, "sdnpu")
    if h:
        return os.path.join(h, ".cache", "sdnpu")
    return "/tmp/sdnpu-cache"


def _set_cache_dir(L: _Lib) -> None:
    err = CError()
    if L.sdnpu_set_cache_dir(cache_dir().encode(), byref(err)) != 0:
        raise OSError("sdnpu: cache directory %r: %s" % (cache_dir(), err.message.decode("utf-8", "replace")))
