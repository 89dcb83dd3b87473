// config_write.c — kda_config_write_yaml (config.h): every key of the table (config_impl.h) in
// its order, under section comments.
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/common.h"
#include "base/config.h"
#include "base/config_impl.h"

// ---------------------------------------------------------------------------------------------
// Writing: every key, strings double-quoted, numbers in the shortest form that reads back equal.

static void write_string(FILE *f, const char *s) {
    fputc('"', f);
    for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
        switch (*p) {
        case '"': fputs("\\\"", f); break;
        case '\\': fputs("\\\\", f); break;
        case '\n': fputs("\\n", f); break;
        case '\t': fputs("\\t", f); break;
        case '\r': fputs("\\r", f); break;
        default:
            if (*p < 0x20 || *p == 0x7f)
                fprintf(f, "\\x%02x", *p);
            else
                fputc(*p, f);
        }
    }
    fputc('"', f);
}

static void write_double(FILE *f, double v) {
    char buf[40];
    for (int prec = 15; prec <= 17; prec++) {
        snprintf(buf, sizeof buf, "%.*g", prec, v);
        if (strtod(buf, NULL) == v) break;
    }
    // "2" -> "2.0", "1e-06" -> "1.0e-06": reads as a float in YAML 1.1 readers (PyYAML) too
    char *e = strchr(buf, 'e');
    if (!strchr(buf, '.')) {
        size_t at = e ? (size_t)(e - buf) : strlen(buf);
        memmove(buf + at + 2, buf + at, strlen(buf + at) + 1);
        memcpy(buf + at, ".0", 2);
    }
    fputs(buf, f);
}

void kda_config_write_yaml(const kda_config *c, FILE *f) {
    fputs("# kda configuration (kda_config_write_yaml); `kda train FILE` reads it back unchanged\n", f);
    const char *section = NULL;
    for (size_t i = 0; i < cfg_n_keys; i++) {
        const key_def *k = &cfg_keys[i];
        const char *field = (const char *)c + k->off;
        if (k->section != section) {
            fprintf(f, "%s# ---- %s ----\n", section ? "\n" : "", k->section);
            section = k->section;
        }
        fprintf(f, "%s: ", k->name);
        switch (k->type) {
        case K_INT: {
            int v = *(const int *)field;
            if (k->nullable && v == k->null_value)
                fputs("null", f);
            else
                fprintf(f, "%d", v);
            break;
        }
        case K_LONG: fprintf(f, "%ld", *(const long *)field); break;
        case K_DOUBLE: write_double(f, *(const double *)field); break;
        case K_BOOL: fputs(*(const int *)field ? "true" : "false", f); break;
        case K_STR: write_string(f, field); break;
        case K_PATHS: {
            int n = *(const int *)((const char *)c + k->count_off);
            fputc('[', f);
            for (int j = 0; j < n; j++) {
                if (j) fputs(", ", f);
                write_string(f, field + (size_t)j * k->size);
            }
            fputc(']', f);
            break;
        }
        }
        fputc('\n', f);
    }
    if (ferror(f)) kda_die("writing the configuration as YAML failed: %s", strerror(errno));
}
