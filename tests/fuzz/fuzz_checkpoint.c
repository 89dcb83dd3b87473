// libFuzzer target: loading a checkpoint whose state.json (first input byte even) or
// model.safetensors (odd) is replaced by arbitrary bytes; the other files are valid.
// kda_die longjmps back here instead of exiting.
#include <setjmp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "train/checkpoint.h"
#include "base/common.h"
#include "base/config.h"
#include "model/model.h"

static kda_model *m;
static char dir[64], good_dir[64];

static void setup(void) {
    kda_config c;
    kda_config_defaults(&c);
    c.hidden_size = 16;
    c.num_hidden_layers = 1;
    c.num_heads = 2;
    c.head_dim = 8;
    c.intermediate_size = 32;
    c.seq_length = 8;
    c.micro_batch_size = 1;
    c.global_batch_size = 1;
    kda_config_finalize(&c);
    m = kda_model_create(&c, kda_ops_cpu(), 1, 8);
    kda_model_init(m, 1);
    kda_model_alloc_optim(m);
    snprintf(good_dir, sizeof good_dir, "/tmp/kda-fuzz-ck-%d", (int)getpid());
    kda_train_state st = {0};
    kda_ckpt_save(m, &st, good_dir);
    snprintf(dir, sizeof dir, "%s/iter_0000000", good_dir);
}

static void copy_in(const char *name, const uint8_t *data, size_t size) {
    char p[128];
    snprintf(p, sizeof p, "%s/%s", dir, name);
    FILE *f = fopen(p, "wb");
    if (!f) return;
    fwrite(data, 1, size, f);
    fclose(f);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (!m) setup();
    if (size < 1) return 0;
    // restore valid files, then damage one
    kda_train_state st = {0};
    kda_ckpt_save(m, &st, good_dir);
    copy_in(data[0] & 1 ? "model.safetensors" : "state.json", data + 1, size - 1);
    jmp_buf jb;
    kda_die_longjmp(&jb);
    if (!setjmp(jb)) {
        kda_train_state got;
        kda_ckpt_load(m, dir, 1, &got, 1);
    }
    kda_die_longjmp(NULL);
    return 0;
}
