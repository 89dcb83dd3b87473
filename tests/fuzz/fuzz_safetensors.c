// libFuzzer target: the safetensors reader on arbitrary bytes. Must never read out of bounds
// (ASan) nor crash; every rejection is an error string.
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "formats/safetensors.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    char path[64];
    snprintf(path, sizeof path, "/tmp/kda-fuzz-st-%d", (int)getpid());
    FILE *f = fopen(path, "wb");
    if (!f) return 0;
    fwrite(data, 1, size, f);
    fclose(f);
    char err[512];
    kda_st_file *st = kda_st_open_err(path, err, sizeof err);
    if (st) {
        for (int i = 0; i < st->n; i++) {
            const kda_st_entry *e = &st->entries[i];
            if (e->numel > (1u << 20)) continue;
            float *out = malloc((e->numel ? e->numel : 1) * sizeof(float));
            kda_st_to_f32(st, e, out);
            free(out);
            (void)kda_st_find(st, e->name);
        }
        kda_st_close(st);
    }
    unlink(path);
    return 0;
}
