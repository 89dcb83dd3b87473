// libFuzzer target: the config.json reader of `kda import` (jansson + key mapping + finalize).
// kda_die longjmps back here instead of exiting.
#include <setjmp.h>
#include <stdint.h>
#include <stdio.h>
#include <unistd.h>

#include "base/common.h"
#include "base/config.h"
#include "train/hf_interop.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    char path[64];
    snprintf(path, sizeof path, "/tmp/kda-fuzz-cfg-%d.json", (int)getpid());
    FILE *f = fopen(path, "wb");
    if (!f) return 0;
    fwrite(data, 1, size, f);
    fclose(f);
    static kda_config c;
    jmp_buf jb;
    kda_die_longjmp(&jb);
    if (!setjmp(jb)) {
        kda_config_defaults(&c);
        kda_hf_read_config(&c, path);
        kda_config_finalize(&c);
    }
    kda_die_longjmp(NULL);
    unlink(path);
    return 0;
}
