/* page.c - finding the embedded files of the page of `sdnpu serve` (see page.h): the files of
 * server/page/ as byte arrays, generated into the build folder by cmake/embed.cmake. */
#include "server/page.h"

#include <string.h>

const srv_page_file *srv_page_find(const char *url) {
    if (!url) return NULL;
    if (!strcmp(url, "/")) url = "/index.html";
    for (int i = 0; i < srv_page_n_files; i++)
        if (!strcmp(srv_page_files[i].path, url)) return &srv_page_files[i];
    return NULL;
}

const char *srv_page_type(const srv_page_file *f) {
    static const struct { const char *ext, *type; } types[] = {
        {".html", "text/html; charset=utf-8"}, {".css", "text/css; charset=utf-8"}, {".js", "text/javascript; charset=utf-8"},
        {".png", "image/png"},                 {".svg", "image/svg+xml"},           {".ico", "image/x-icon"},
    };
    const char *dot = strrchr(f->path, '.');
    for (size_t i = 0; dot && i < sizeof types / sizeof types[0]; i++)
        if (!strcmp(dot, types[i].ext)) return types[i].type;
    return "application/octet-stream";
}
