"""sdnpu: speculative-decoding LLM inference on CPUs, from Python.

A thin, typed layer over libsdnpu (the C library does all the work, through ctypes):

    import sdnpu
    model = sdnpu.Model("smollm2-135m-instruct")          # a known name (cached) or a path
    ctx = model.context(n_ctx=4096, threads=2)
    r = ctx.generate(prompt="Say hello.", max_tokens=64)  # greedy, method "sdnpu"
    print(r.text, r.steps, r.mean_accepted_tokens)
    for piece in ctx.stream(prompt="Tell a story.", max_tokens=64):
        print(piece, end="")

Benchmarks and offline acceptance studies (``sdnpu.bench``, ``sdnpu.study``: records for
pandas), their plots (``sdnpu.plots``) and studies over a Ray cluster
(``sdnpu.distributed``) run the ``sdnpu`` program, which the wheel ships beside the
library. docs/python.md has the details.
"""

from .core import (
    EDB,
    EFORMAT,
    EINVAL,
    EIO,
    ENOMEM,
    ESTATE,
    EUNSUP,
    OK,
    Context,
    Error,
    Model,
    ModelInfo,
    Result,
    Stream,
    executable,
    known_models,
    methods,
    pull,
    version,
)
from .studies import Records, bench, study, trace

__version__ = "0.9.0"

__all__ = [
    "OK", "EINVAL", "EFORMAT", "EIO", "ENOMEM", "EUNSUP", "EDB", "ESTATE",
    "Context", "Error", "Model", "ModelInfo", "Result", "Stream", "Records",
    "bench", "study", "trace", "executable", "known_models", "methods", "pull", "version",
]
