/* fuzz_util.h - helpers shared by the libFuzzer targets of fuzz/: the input as a file
 * (loaders that take a path read it through /proc/self/fd of a memfd, no disk I/O) and
 * the input split into NUL-separated fields. Header-only; every target is one .c file. */
#ifndef SDN_FUZZ_UTIL_H
#define SDN_FUZZ_UTIL_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

/* Write data to a fresh memfd; path receives "/proc/self/fd/N". Returns the fd (close it
 * when done) or -1. */
static inline int fz_memfile(const uint8_t *data, size_t size, char path[64]) {
    int fd = memfd_create("fuzz-input", 0);
    if (fd < 0) return -1;
    size_t off = 0;
    while (off < size) {
        ssize_t w = write(fd, data + off, size - off);
        if (w <= 0) { close(fd); return -1; }
        off += (size_t)w;
    }
    snprintf(path, 64, "/proc/self/fd/%d", fd);
    return fd;
}

/* Split a copy of the input at NUL bytes into at most max fields (the last field keeps
 * any further NULs' text cut off). buf must hold size + 1 bytes. Returns the count. */
static inline int fz_fields(const uint8_t *data, size_t size, char *buf, const char **f, int max) {
    memcpy(buf, data, size);
    buf[size] = 0;
    int n = 0;
    size_t start = 0;
    for (size_t i = 0; i <= size && n < max; i++)
        if (i == size || buf[i] == 0) {
            f[n++] = buf + start;
            start = i + 1;
        }
    return n;
}

#endif
