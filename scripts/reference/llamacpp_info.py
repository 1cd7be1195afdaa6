"""llamacpp_info.py - what the reference scripts record about the machine and the llama.cpp
build they compare against (shared by smollm2_golden.py, family_golden.py and peer_pld.py).

The build options are read back from the installed package itself: llama-cpp-python installs
ggml's CMake package file (lib/cmake/ggml/ggml-config.cmake next to the llama_cpp package),
which lists every GGML_* option the library was configured with, so the record does not rely
on remembering the CMAKE_ARGS of the pip install.
"""
import glob
import os
import platform
import re
import subprocess

import llama_cpp

# the options that decide the CPU kernels llama.cpp runs (the rest are GPU backends, etc.)
CPU_OPTIONS = ("GGML_NATIVE", "GGML_AVX", "GGML_AVX2", "GGML_AVX512", "GGML_AVX512_VNNI", "GGML_AVX512_BF16", "GGML_AVX_VNNI",
               "GGML_AMX_TILE", "GGML_AMX_INT8", "GGML_AMX_BF16", "GGML_FMA", "GGML_F16C", "GGML_OPENMP", "GGML_LLAMAFILE",
               "GGML_CPU_REPACK", "GGML_BLAS", "GGML_CPU_ALL_VARIANTS", "GGML_BACKEND_DL", "GGML_VERSION", "GGML_BUILD_COMMIT")


def cpu_model():
    try:
        for line in open("/proc/cpuinfo"):
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.machine()


def compiler():
    """The system C compiler's first version line (what a source install of the package used)."""
    try:
        return subprocess.run(["cc", "--version"], capture_output=True, text=True).stdout.splitlines()[0]
    except (OSError, IndexError):
        return "?"


def _package_dir():
    return os.path.dirname(os.path.abspath(llama_cpp.__file__))


def ggml_options():
    """GGML_* options of the installed build, from its ggml-config.cmake ({} when absent)."""
    site = os.path.dirname(_package_dir())
    out = {}
    for path in glob.glob(os.path.join(site, "lib", "cmake", "ggml", "ggml-config.cmake")) + \
            glob.glob(os.path.join(_package_dir(), "lib", "cmake", "ggml", "ggml-config.cmake")):
        with open(path, encoding="utf-8", errors="replace") as f:
            for line in f:
                m = re.match(r'\s*set\((GGML_[A-Z0-9_]+)\s+"([^"]*)"\)', line)
                if m and m.group(1) in CPU_OPTIONS:
                    out[m.group(1)] = m.group(2)
        break
    return out


def library_compiler():
    """The compiler named in libggml-cpu's .comment section ("GCC: (...) 12.2.0"), or None."""
    for path in glob.glob(os.path.join(_package_dir(), "lib", "libggml-cpu.so*")):
        try:
            with open(path, "rb") as f:
                m = re.search(rb"GCC: \([^)]*\) [0-9][0-9.]*|clang version [0-9][0-9.]*", f.read())
        except OSError:
            continue
        if m:
            return m.group(0).decode("ascii", "replace")
    return None


def build_info(cmake_args=None):
    """The llama.cpp side of a comparison: versions, system info string, build options."""
    return {
        "reference": "llama.cpp via llama-cpp-python %s" % llama_cpp.__version__,
        "llama_cpp_python": llama_cpp.__version__,
        "system_info": llama_cpp.llama_print_system_info().decode().strip(),
        "ggml_options": ggml_options(),
        "cmake_args": cmake_args if cmake_args is not None else os.environ.get("CMAKE_ARGS", ""),
        "library_compiler": library_compiler(),
        "compiler": compiler(),
        "omp_wait_policy": os.environ.get("OMP_WAIT_POLICY", "(unset: libgomp default)"),
    }
