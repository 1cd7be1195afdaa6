"""Fixtures of the Python package's tests (python/tests; scripts/test-python.sh runs them).

The package under test is the installed one (the wheel: its libsdnpu.so and sdnpu
program), or the one SDNPU_LIBRARY / SDNPU_EXE point at with python/ on PYTHONPATH.
Real-model tests use SmolLM2-135M-Instruct from the model cache and stories260K from
../shared (SDN_SHARED overrides); without them they skip, and under CI=true they fail.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

import sdnpu

ROOT = Path(__file__).resolve().parents[2]
SHARED = Path(os.environ.get("SDN_SHARED", ROOT.parent / "shared"))
CI = os.environ.get("CI") == "true"
SMOLLM2 = "smollm2-135m-instruct"


def need(cond: bool, why: str) -> None:
    """Skip when cond is false, or fail under CI=true (missing inputs must not pass there)."""
    if not cond:
        if CI:
            pytest.fail(f"CI=true and {why}")
        pytest.skip(why)


@pytest.fixture(scope="session")
def exe() -> str:
    e = sdnpu.executable()
    need(e is not None, "no sdnpu program (install the wheel or set SDNPU_EXE)")
    assert e is not None
    return e


@pytest.fixture(scope="session")
def smollm2() -> sdnpu.Model:
    try:
        m = sdnpu.Model(SMOLLM2)
    except sdnpu.Error as e:
        need(False, f"{SMOLLM2} not in the model cache ({e.message}); `sdnpu pull {SMOLLM2}`")
        raise
    yield m
    m.close()


@pytest.fixture(scope="session")
def stories() -> dict[str, Path]:
    d = SHARED / "models" / "stories260K"
    need((d / "stories260K.bin").exists(), f"{d}/stories260K.bin missing (../shared)")
    return {"model": d / "stories260K.bin", "tokenizer": d / "tok512.bin"}


@pytest.fixture(scope="session")
def story_data(tmp_path_factory: pytest.TempPathFactory, exe: str, stories: dict[str, Path]) -> dict[str, Path]:
    """A 24-request story task (make-story-task) and its trace with prefill predictions
    (sdnpu trace), made once per session with the stories260K model."""
    d = tmp_path_factory.mktemp("stories")
    task, trace = d / "stories.jsonl", d / "stories.trace.jsonl"
    m = ["--model", str(stories["model"]), "--tokenizer", str(stories["tokenizer"])]
    subprocess.run([exe, "make-story-task", *m, "--out", str(task), "--n", "24", "--seed", "7"], check=True, capture_output=True)
    sdnpu.trace(stories["model"], task, trace, tokenizer=stories["tokenizer"], max_tokens=64, threads=1)
    return {"task": task, "trace": trace, **stories}
