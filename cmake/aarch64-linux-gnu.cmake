# CMake toolchain for cross-building sdnpu for AArch64 Linux on a Debian x86-64 host:
# Debian's gcc-aarch64-linux-gnu and the arm64 multiarch -dev packages of the dependencies
# (dpkg --add-architecture arm64; docs/kernels.md, "AArch64"). Programs run under qemu-aarch64.
set(CMAKE_SYSTEM_NAME Linux)
set(CMAKE_SYSTEM_PROCESSOR aarch64)
set(CMAKE_C_COMPILER aarch64-linux-gnu-gcc)
# Programs and tests run under qemu-aarch64 with the arm64 multiarch C library's own loader
# (/lib/ld-linux-aarch64.so.1 of libc6:arm64, pulled in by the -dev packages) - not with
# -L /usr/aarch64-linux-gnu: that prefix takes the loader of the cross toolchain's
# libc6-arm64-cross (Debian 12: 2.36-8cross1) while the libraries' search path finds the newer
# libc.so.6 of libc6:arm64 (2.36-9+deb12uN); the two disagree on the loader's private data and
# pthread_create then never returns (any threaded program: sdnpu --threads 2, OpenBLAS's
# thread start). -cpu max: every feature, so each kernel path runs.
set(CMAKE_CROSSCOMPILING_EMULATOR qemu-aarch64 -L / -cpu max)
# the arm64 packages' pkg-config files and libraries (Debian multiarch paths)
set(ENV{PKG_CONFIG_LIBDIR} "/usr/lib/aarch64-linux-gnu/pkgconfig:/usr/share/pkgconfig")
set(CMAKE_FIND_ROOT_PATH /usr/aarch64-linux-gnu /usr/lib/aarch64-linux-gnu)
set(CMAKE_FIND_ROOT_PATH_MODE_PROGRAM NEVER)
set(CMAKE_FIND_ROOT_PATH_MODE_LIBRARY BOTH)
set(CMAKE_FIND_ROOT_PATH_MODE_INCLUDE BOTH)
set(CMAKE_FIND_ROOT_PATH_MODE_PACKAGE BOTH)
