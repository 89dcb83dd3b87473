// dump_batches.c — the training samples `kda train` consumes, to a raw int32 file, for
// bench/parity_vs_fla.sh (FLA trains on exactly the same batches).
//   dump_batches OUT.i32 STEPS [CONFIG.yaml] [--set key=value]...
// The config is built as cli_train.c builds it (defaults, the YAML file, then every --set,
// then kda_config_finalize). One process: step s consumes samples [s*G, (s+1)*G) with
// G = global_batch_size (cli_train.c: per step kda_data_next over the micro-batches from
// `consumed`, then a seek to consumed + G), so the file is STEPS*G samples in that order, each
// seq_length+1 ids (inputs = [:-1], targets = [1:]). Prints one JSON line with the shape.
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/common.h"
#include "base/config.h"
#include "data/data.h"

int main(int argc, char **argv) {
    if (argc < 3) {
        fprintf(stderr, "usage: dump_batches OUT.i32 STEPS [CONFIG.yaml] [--set key=value]...\n");
        return 2;
    }
    const char *out = argv[1];
    long steps = strtol(argv[2], NULL, 10);
    if (steps <= 0) kda_die("dump_batches: STEPS must be > 0 (got '%s')", argv[2]);
    kda_config cfg;
    kda_config_defaults(&cfg);
    const char *path = NULL;
    for (int i = 3; i < argc; i++) {
        if (!strcmp(argv[i], "--set")) {
            i++;
            continue;
        }
        if (path) kda_die("dump_batches takes one config file; got '%s' and '%s'", path, argv[i]);
        path = argv[i];
    }
    if (path) kda_config_load(&cfg, path);
    for (int i = 3; i < argc; i++)
        if (!strcmp(argv[i], "--set")) {
            if (i + 1 >= argc) kda_die("--set needs a value");
            kda_config_set(&cfg, argv[++i]);
        }
    kda_config_finalize(&cfg);
    int G = cfg.global_batch_size, T = cfg.seq_length;
    kda_data *data = kda_data_open(&cfg, KDA_SPLIT_TRAIN);
    FILE *f = fopen(out, "wb");
    if (!f) kda_die("dump_batches: cannot write '%s'", out);
    int32_t *buf = kda_malloc(sizeof(int32_t) * (size_t)G * (T + 1));
    for (long s = 0; s < steps; s++) {
        uint64_t base = kda_data_consumed(data);
        kda_data_next(data, buf, G);
        kda_data_seek(data, base + (uint64_t)G);
        if (fwrite(buf, sizeof(int32_t), (size_t)G * (T + 1), f) != (size_t)G * (T + 1))
            kda_die("dump_batches: short write to '%s'", out);
    }
    if (fclose(f)) kda_die("dump_batches: cannot close '%s'", out);
    printf("{\"steps\": %ld, \"global_batch_size\": %d, \"seq_length\": %d, \"vocab_size\": %d, \"samples\": %llu}\n",
           steps, G, T, cfg.vocab_size, (unsigned long long)kda_data_consumed(data));
    free(buf);
    kda_data_close(data);
    return 0;
}
