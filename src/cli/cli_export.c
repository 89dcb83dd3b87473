// cli_export.c — `kda export` (checkpoint -> FLA KDAForCausalLM folder) and `kda import`
// (FLA / HF folder -> kda checkpoint).
#include <errno.h>
#include <libgen.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/run_guard.h"
#include "text/tokenizer.h"
#include "train/checkpoint.h"
#include "cli/cli.h"
#include "cli/cli_args.h"
#include "base/common.h"
#include "base/config.h"
#include "train/hf_interop.h"
#include "model/model.h"

static void copy_file(const char *src, const char *dst) {
    FILE *in = kda_fopen(src, "rb"), *out = kda_fopen(dst, "wb");
    char buf[1 << 16];
    size_t n;
    while ((n = fread(buf, 1, sizeof buf, in)) > 0)
        if (fwrite(buf, 1, n, out) != n) kda_die("cannot write '%s': %s", dst, strerror(errno));
    if (ferror(in)) kda_die("cannot read '%s'", src);
    fclose(in);
    if (fflush(out) != 0 || fsync(fileno(out)) != 0) kda_die("cannot write '%s': %s", dst, strerror(errno));
    fclose(out);
}

// The tokenizer.json an export includes, into json: --tokenizer's PATH (a tokenizer.json, or a
// folder that holds one) or else the checkpoint's tokenizer_model (a tokenizer.json, or a tiktoken
// .model with a tokenizer.json beside it). 0 for a byte-level checkpoint without --tokenizer. The
// file is loaded as a tokenizer here, before anything is written, so that one that cannot be read
// or is not a tokenizer.json stops the export naming it.
static int export_tokenizer_json(const kda_config *cfg, const char *override, char *json, size_t cap) {
    int byte = !strcmp(cfg->tokenizer_type, "byte");
    if (override && byte)
        kda_die("kda export: --tokenizer '%s': the checkpoint is a byte-level model (tokenizer_type byte), which "
                "takes no tokenizer file",
                override);
    if (!override && (byte || !cfg->tokenizer_model[0])) return 0;
    const char *p = override ? override : cfg->tokenizer_model;
    const char *who = override ? "--tokenizer" : "the checkpoint's tokenizer_model";
    const char *fix = override ? "name a tokenizer.json" : "pass --tokenizer PATH so that the export includes it";
    struct stat st;
    if (stat(p, &st) != 0) kda_die("kda export: %s '%s' is not readable from here (%s); %s", who, p, strerror(errno), fix);
    size_t n = strlen(p);
    if (S_ISDIR(st.st_mode)) {
        kda_path(json, cap, "%s/tokenizer.json", p);
    } else if (n > 6 && !strcmp(p + n - 6, ".model")) {
        char dir[KDA_PATH_MAX];
        snprintf(dir, sizeof dir, "%s", p);
        kda_path(json, cap, "%s/tokenizer.json", dirname(dir));
    } else {
        kda_path(json, cap, "%s", p);
    }
    if (access(json, R_OK) != 0) kda_die("kda export: %s '%s': no readable tokenizer.json at '%s'; %s", who, p, json, fix);
    kda_tok_free(kda_tok_load_hf(json)); // dies naming the file if it is not a tokenizer.json
    return 1;
}

// json as OUT/tokenizer.json, with tokenizer_config.json and special_tokens_map.json from its folder
static void copy_tokenizer_files(const char *json, const char *out_dir) {
    char dir[KDA_PATH_MAX * 2], src[KDA_PATH_MAX * 3], dst[KDA_PATH_MAX * 3];
    kda_path(dst, sizeof dst, "%s/tokenizer.json", out_dir);
    copy_file(json, dst);
    snprintf(dir, sizeof dir, "%s", json);
    char *d = dirname(dir);
    static const char *const companions[] = {"tokenizer_config.json", "special_tokens_map.json", NULL};
    for (int i = 0; companions[i]; i++) {
        kda_path(src, sizeof src, "%s/%s", d, companions[i]);
        if (access(src, R_OK) != 0) continue;
        kda_path(dst, sizeof dst, "%s/%s", out_dir, companions[i]);
        copy_file(src, dst);
    }
}

static void rm_dir_files(void *arg) {
    const char *dir = arg;
    static const char *const files[] = {"config.json",
                                        "model.safetensors",
                                        "generation_config.json",
                                        "tokenizer.json",
                                        "tokenizer_config.json",
                                        "special_tokens_map.json",
                                        NULL};
    char p[KDA_PATH_MAX * 2];
    for (int i = 0; files[i]; i++) {
        kda_path(p, sizeof p, "%s/%s", dir, files[i]);
        unlink(p);
    }
    rmdir(dir);
}

int cmd_export(int argc, char **argv) {
    const char *src = NULL, *out = NULL, *tok_override = NULL;
    int bf16 = 1, force = 0;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
            printf("usage: kda export CHECKPOINT OUT_DIR [--dtype bf16|fp32] [--force] [--tokenizer PATH]\n"
                   "Writes an FLA KDAForCausalLM folder (config.json, model.safetensors, generation_config.json,\n"
                   "tokenizer files) that transformers + FLA load with AutoModelForCausalLM.from_pretrained.\n"
                   "CHECKPOINT is a checkpoint directory or a save directory (its 'latest' is used).\n"
                   "  --dtype bf16|fp32   weight type of model.safetensors (default bf16)\n"
                   "  --force             replace an existing OUT_DIR\n"
                   "  --tokenizer PATH    tokenizer.json (or a folder holding one) to include instead of the\n"
                   "                      checkpoint's tokenizer_model\n"
                   "A tokenizer the checkpoint names but that cannot be read is an error, never left out.\n");
            return 0;
        } else if (!strcmp(argv[i], "--dtype")) {
            const char *v = kda_cli_value("export", argc, argv, &i);
            if (!strcmp(v, "bf16"))
                bf16 = 1;
            else if (!strcmp(v, "fp32"))
                bf16 = 0;
            else
                kda_cli_usage_error("export", "--dtype '%s': use bf16 or fp32", v);
        } else if (!strcmp(argv[i], "--force")) {
            kda_cli_flag("export", argv[i]);
            force = 1;
        } else if (!strcmp(argv[i], "--tokenizer")) {
            tok_override = kda_cli_value("export", argc, argv, &i);
        } else if (argv[i][0] == '-') {
            kda_cli_usage_error("export", "unknown option '%s'", argv[i]);
        } else if (!src) {
            src = argv[i];
        } else if (!out) {
            out = argv[i];
        } else {
            kda_cli_usage_error("export", "takes CHECKPOINT and OUT_DIR; unexpected '%s'", argv[i]);
        }
    }
    if (!src || !out) kda_cli_usage_error("export", "needs CHECKPOINT and OUT_DIR");
    char *ck = kda_ckpt_resolve(src);
    if (!ck) kda_die("'%s' holds no checkpoint", src);
    kda_config cfg;
    kda_config_defaults(&cfg);
    char path[KDA_PATH_MAX * 2];
    kda_path(path, sizeof path, "%s/config.yaml", ck);
    kda_config_load(&cfg, path);
    kda_config_finalize(&cfg);
    struct stat st;
    if (stat(out, &st) == 0 && !force) kda_die("'%s' exists; choose another OUT_DIR or pass --force", out);
    kda_guard_not_input("OUT_DIR", out, ck); // --force would move it aside: ck, or its save folder, or above
    char tok_json[KDA_PATH_MAX * 2];
    int has_tok = export_tokenizer_json(&cfg, tok_override, tok_json, sizeof tok_json);
    kda_model *m = kda_model_create(&cfg, kda_ops_cpu(), 1, 1);
    kda_ckpt_load(m, ck, 0, NULL, 0);

    char tmp[KDA_PATH_MAX * 2];
    snprintf(tmp, sizeof tmp, "%s.tmp-%d", out, (int)getpid());
    if (mkdir(tmp, 0755) != 0) kda_die("cannot create '%s': %s", tmp, strerror(errno));
    kda_on_die(rm_dir_files, tmp);
    kda_hf_write_config(&cfg, tmp, bf16 ? "bfloat16" : "float32");
    kda_hf_write_weights(m, tmp, bf16);
    kda_path(path, sizeof path, "%s/generation_config.json", tmp);
    FILE *g = kda_fopen(path, "w");
    // always written, as --help says; an unset id is null (transformers reads null as none)
    char bos[16] = "null", eos[16] = "null";
    if (cfg.bos_token_id >= 0) snprintf(bos, sizeof bos, "%d", cfg.bos_token_id);
    if (cfg.eos_token_id >= 0) snprintf(eos, sizeof eos, "%d", cfg.eos_token_id);
    fprintf(g, "{\n  \"bos_token_id\": %s,\n  \"eos_token_id\": %s\n}\n", bos, eos);
    if (fclose(g) != 0) kda_die("cannot write '%s': %s", path, strerror(errno));
    if (has_tok) copy_tokenizer_files(tok_json, tmp);
    if (stat(out, &st) == 0) { // --force: move the old folder aside, then replace
        char old[KDA_PATH_MAX * 2 + 16];
        snprintf(old, sizeof old, "%s.old-%d", out, (int)getpid());
        if (rename(out, old) != 0) kda_die("cannot move aside '%s': %s", out, strerror(errno));
        rm_dir_files(old);
        // only the files an export writes are deleted; anything else stays, under the new name
        if (access(old, F_OK) == 0)
            fprintf(stderr, "kda export: '%s' held other files too; they are now in '%s'\n", out, old);
    }
    if (rename(tmp, out) != 0) kda_die("cannot rename '%s' to '%s': %s", tmp, out, strerror(errno));
    kda_on_die_remove(rm_dir_files, tmp);
    printf("kda export: %s -> %s (%s, %zu parameters%s)\n", ck, out, bf16 ? "bf16" : "fp32", kda_model_num_params(m),
           has_tok ? ", tokenizer files" : "");
    kda_model_free(m);
    free(ck);
    return 0;
}

int cmd_import(int argc, char **argv) {
    const char *src = NULL, *out = NULL, *yaml = NULL;
    kda_config cfg;
    kda_config_defaults(&cfg);
    // the defaults' tokenizer is the demo's; an import takes the folder's tokenizer.json (below)
    // unless --config / --set name one, and bytes when there is none
    snprintf(cfg.tokenizer_type, sizeof cfg.tokenizer_type, "byte");
    cfg.tokenizer_model[0] = 0;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
            printf("usage: kda import HF_DIR SAVE_DIR [--config TRAIN.yaml] [--set key=value]...\n"
                   "Converts an FLA / Hugging Face KDAForCausalLM folder (model.safetensors or sharded with\n"
                   "model.safetensors.index.json; BF16 or F32; tied lm_head present or absent) into a kda\n"
                   "checkpoint (iteration 0, weights only) under SAVE_DIR. Train from it with\n"
                   "  kda train TRAIN.yaml --set load=SAVE_DIR --set finetune=true\n"
                   "Model keys come from config.json; --config / --set supply the training keys stored with it.\n");
            return 0;
        } else if (!strcmp(argv[i], "--config")) {
            yaml = kda_cli_value("import", argc, argv, &i);
        } else if (!strcmp(argv[i], "--set")) {
            kda_cli_set_value("import", kda_cli_value("import", argc, argv, &i));
        } else if (argv[i][0] == '-') {
            kda_cli_usage_error("import", "unknown option '%s'", argv[i]);
        } else if (!src) {
            src = argv[i];
        } else if (!out) {
            out = argv[i];
        } else {
            kda_cli_usage_error("import", "takes HF_DIR and SAVE_DIR; unexpected '%s'", argv[i]);
        }
    }
    if (!src || !out) kda_cli_usage_error("import", "needs HF_DIR and SAVE_DIR");
    // an import is iteration 0: over an existing run it would repoint `latest` and hijack a resume
    char *existing = kda_ckpt_resolve(out);
    if (existing) kda_die("'%s' already holds a checkpoint (%s); import into a new SAVE_DIR", out, existing);
    if (yaml) kda_config_load(&cfg, yaml);
    char path[KDA_PATH_MAX * 2];
    kda_path(path, sizeof path, "%s/config.json", src);
    kda_hf_read_config(&cfg, path);
    for (int i = 1; i < argc; i++)
        if (!strcmp(argv[i], "--set")) kda_config_set(&cfg, argv[++i]);
    kda_path(path, sizeof path, "%s/tokenizer.json", src);
    if (access(path, R_OK) == 0 && !cfg.tokenizer_model[0]) {
        char *abs = realpath(path, NULL); // the checkpoint may be used from another directory
        if (!abs) kda_die("cannot resolve '%s': %s", path, strerror(errno));
        kda_path(cfg.tokenizer_model, sizeof cfg.tokenizer_model, "%s", abs);
        free(abs);
        snprintf(cfg.tokenizer_type, sizeof cfg.tokenizer_type, "HuggingFaceTokenizer");
    }
    kda_config_finalize(&cfg);
    kda_model *m = kda_model_create(&cfg, kda_ops_cpu(), 1, 1);
    kda_hf_read_weights(m, src);
    kda_train_state st = {0};
    kda_rng_seed(&st.rng, (uint64_t)cfg.seed);
    kda_ckpt_save(m, &st, out);
    printf("kda import: %s -> %s/iter_0000000 (%zu parameters)\n", src, out, kda_model_num_params(m));
    kda_model_free(m);
    return 0;
}
