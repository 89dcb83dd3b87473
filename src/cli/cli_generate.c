// cli_generate.c — `kda generate`: text from a checkpoint (or a freshly initialised model, for
// tests and smoke runs) through the decoder (generate.h) on the CPU or CUDA backend: the prompt
// through the chunked form, then one token at a time through the recurrent state. Each prompt is echoed, its
// continuation streamed to stdout token by token (flushed per token), then a newline; timing
// goes to stderr with --show-stats so stdout stays pure text.
#include <errno.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "cli/cli.h"
#include "cli/cli_args.h"
#include "base/common.h"
#include "base/config.h"
#include "infer/generate.h"
#include "infer/loader.h"
#include "model/model.h"
#include "text/tokenizer.h"

#define MAX_SETS 64

typedef struct {
    const char *ckpt, *config, *tokenizer, *prompt_file, *device;
    const char **prompts;
    int n_prompts;
    const char *sets[MAX_SETS];
    int n_sets;
    int have_init_seed, have_seed, show_stats, echo, print_ids;
    long init_seed;
    unsigned long long seed;
    long max_new;
    kda_sampling samp;
} gen_opts;

static void usage(FILE *f) {
    fprintf(f,
            "usage: kda generate CHECKPOINT [options]\n"
            "       kda generate --init-seed N [--config CONFIG.yaml] [options]\n"
            "\n"
            "Continues each prompt with the model's recurrent form (fixed memory per layer: conv tail + KDA\n"
            "state; the prompt goes through the chunked form in blocks of up to %d tokens) and streams the\n"
            "text to stdout as it is generated, one line per prompt (prompt echoed).\n"
            "  CHECKPOINT               a checkpoint directory (<save>/iter_NNNNNNN) or a save directory with\n"
            "                           a 'latest' file; its config.yaml gives the model and the tokenizer\n"
            "  --init-seed N            instead, a freshly initialised model (kda-model.md §4) from --config\n"
            "                           (default: the built-in tiny model)\n"
            "  --config PATH            model configuration for --init-seed\n"
            "  --set key=value          configuration override (e.g. num_threads=1, tokenizer_model=...)\n"
            "  --prompt TEXT            a prompt (repeatable)\n"
            "  --prompt-file PATH       prompts, one per line (blank lines skipped)\n"
            "  --max-new-tokens N       most tokens generated per prompt (default 128)\n"
            "  --temperature X          0 = greedy (default); > 0 samples\n"
            "  --top-k N                keep the N most likely tokens (0 = off, default)\n"
            "  --top-p X                keep the smallest most-likely set with mass >= X (1 = off, default)\n"
            "  --repetition-penalty X   Hugging Face's: divide positive / multiply negative logits of ids already\n"
            "                           in the prompt or output (1 = off, default)\n"
            "  --seed N                 sampling seed (default: the config's seed)\n"
            "  --tokenizer PATH         tokenizer.json (or tiktoken .model) instead of the config's tokenizer_model\n"
            "                           ('bytes' for a byte-level model, which takes no file)\n"
            "  --device D               auto | cpu | cuda (default: the config's device; auto = CUDA when usable)\n"
            "  --no-echo                print only the continuations\n"
            "  --print-ids              print the generated token ids (space-separated, end of text included)\n"
            "                           instead of text, one line per prompt\n"
            "  --show-stats             per prompt on stderr: prefill time, time to first token, tokens/s\n"
            "Generation stops at eos_token_id when the config sets one; prompts start with bos_token_id when\n"
            "it is set. tokenizer_type byte: ids are bytes; HuggingFaceTokenizer: tokenizer_model.\n",
            KDA_GEN_BLOCK);
}

static void parse_args(int argc, char **argv, gen_opts *o) {
    *o = (gen_opts){.echo = 1, .max_new = 128};
    o->samp = (kda_sampling){.temperature = 0, .top_k = 0, .top_p = 1, .repetition_penalty = 1};
    o->prompts = kda_calloc((size_t)argc, sizeof(char *));
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            usage(stdout);
            exit(0);
        }
        if (!strcmp(a, "--show-stats") || !strcmp(a, "--no-echo") || !strcmp(a, "--print-ids")) {
            kda_cli_flag("generate", a);
            if (!strcmp(a, "--show-stats"))
                o->show_stats = 1;
            else if (!strcmp(a, "--no-echo"))
                o->echo = 0;
            else
                o->print_ids = 1;
            continue;
        }
        if (a[0] != '-') {
            if (o->ckpt) kda_cli_usage_error("generate", "two checkpoints given ('%s', '%s'); give one", o->ckpt, a);
            o->ckpt = a;
            continue;
        }
        static const char *const with_value[] = {"--prompt",
                                                 "--prompt-file",
                                                 "--config",
                                                 "--tokenizer",
                                                 "--device",
                                                 "--set",
                                                 "--init-seed",
                                                 "--seed",
                                                 "--max-new-tokens",
                                                 "--temperature",
                                                 "--top-k",
                                                 "--top-p",
                                                 "--repetition-penalty",
                                                 NULL};
        if (!kda_cli_one_of(a, with_value)) kda_cli_usage_error("generate", "unknown option '%s'", a);
        const char *v = kda_cli_value("generate", argc, argv, &i);
        if (!strcmp(a, "--prompt"))
            o->prompts[o->n_prompts++] = v;
        else if (!strcmp(a, "--prompt-file"))
            o->prompt_file = v;
        else if (!strcmp(a, "--config"))
            o->config = v;
        else if (!strcmp(a, "--tokenizer"))
            o->tokenizer = v;
        else if (!strcmp(a, "--device"))
            o->device = kda_cli_device("generate", v);
        else if (!strcmp(a, "--set")) {
            kda_cli_set_value("generate", v);
            if (o->n_sets == MAX_SETS) kda_cli_usage_error("generate", "more than %d --set options", MAX_SETS);
            o->sets[o->n_sets++] = v;
        } else if (!strcmp(a, "--init-seed")) {
            o->init_seed = kda_cli_long("generate", a, v, 0, 0x7fffffffffffffffL);
            o->have_init_seed = 1;
        } else if (!strcmp(a, "--seed")) {
            o->seed = (unsigned long long)kda_cli_long("generate", a, v, 0, 0x7fffffffffffffffL);
            o->have_seed = 1;
        } else if (!strcmp(a, "--max-new-tokens"))
            o->max_new = kda_cli_long("generate", a, v, 0, 1L << 30);
        else if (!strcmp(a, "--temperature"))
            o->samp.temperature = (float)kda_cli_double("generate", a, v);
        else if (!strcmp(a, "--top-k"))
            o->samp.top_k = (int)kda_cli_long("generate", a, v, 0, 1L << 30);
        else if (!strcmp(a, "--top-p"))
            o->samp.top_p = (float)kda_cli_double("generate", a, v);
        else if (!strcmp(a, "--repetition-penalty"))
            o->samp.repetition_penalty = (float)kda_cli_double("generate", a, v);
    }
    if (o->ckpt && o->have_init_seed)
        kda_cli_usage_error("generate", "give either a checkpoint ('%s') or --init-seed, not both", o->ckpt);
    if (o->ckpt && o->config)
        kda_cli_usage_error("generate",
                            "--config is for --init-seed; a checkpoint brings its own config.yaml "
                            "(use --set to override)");
    if (!o->ckpt && !o->have_init_seed)
        kda_cli_usage_error("generate",
                            "no model: give a checkpoint directory, or --init-seed N for a freshly "
                            "initialised one");
    if (!o->n_prompts && !o->prompt_file)
        kda_cli_usage_error("generate", "no prompt: give --prompt TEXT or --prompt-file PATH");
}

// Prompts from --prompt and --prompt-file, in that order (blank file lines skipped).
static void read_prompt_file(gen_opts *o, char ***owned, int *n_owned) {
    FILE *f = kda_fopen(o->prompt_file, "rb");
    char *line = NULL;
    size_t cap = 0;
    ssize_t r;
    int found = 0;
    *owned = NULL;
    *n_owned = 0;
    while ((r = getline(&line, &cap, f)) >= 0) {
        size_t n = (size_t)r;
        while (n && (line[n - 1] == '\n' || line[n - 1] == '\r')) n--;
        if (n == 0) continue;
        line[n] = 0;
        *owned = kda_realloc(*owned, sizeof(char *) * (size_t)(*n_owned + 1));
        (*owned)[(*n_owned)++] = kda_strdup(line);
        found++;
    }
    if (ferror(f)) kda_die("kda generate: reading prompt file '%s' failed: %s", o->prompt_file, strerror(errno));
    fclose(f);
    free(line);
    if (!found) kda_die("kda generate: prompt file '%s' has no prompts (one prompt per line)", o->prompt_file);
}

// ---- text <-> ids -------------------------------------------------------------------------------

typedef struct {
    kda_tokenizer *tok; // NULL: byte ids
    kda_tok_ctx *ctx;
    int32_t bos;
} codec;

// Over the loaded tokenizer (NULL: byte ids), which outlives the codec.
static void codec_open(codec *c, const kda_config *cfg, kda_tokenizer *tok) {
    *c = (codec){.tok = tok, .bos = cfg->bos_token_id};
    if (c->tok) c->ctx = kda_tok_ctx_new(c->tok);
}

static void codec_close(codec *c) {
    if (c->ctx) kda_tok_ctx_free(c->ctx);
}

// BOS (when the config sets one) + the ids of text.
static void codec_encode(const codec *c, const char *text, kda_tok_ids *out) {
    out->n = 0;
    if (c->bos >= 0) kda_tok_ids_push(out, c->bos);
    if (!c->tok) {
        for (const unsigned char *p = (const unsigned char *)text; *p; p++) kda_tok_ids_push(out, *p);
        return;
    }
    kda_tok_encode(c->ctx, text, strlen(text), 0, out);
}

static void codec_bytes(const codec *c, int32_t id, kda_tok_bytes *out) {
    if (!c->tok) {
        if (id < 256) {
            char b = (char)id;
            kda_tok_bytes_append(out, &b, 1);
        }
        return;
    }
    kda_tok_decode(c->tok, &id, 1, 0, out);
}

// ---- streaming UTF-8 out ----------------------------------------------------------------------

// A token may end inside a multi-byte character: kda_utf8_stream (tokenizer.h) holds back a
// trailing incomplete sequence until the next token completes it; everything else goes out
// with invalid bytes replaced by U+FFFD (as Hugging Face's decode does), so the stream equals
// the decode of all the ids.
typedef struct {
    const codec *c;
    int32_t eos;
    int print_ids, n_out; // --print-ids: ids instead of text; ids printed so far on this line
    kda_utf8_stream out;
} streamer;

static void emit(streamer *s, int final) {
    if (kda_utf8_stream_flush(&s->out, stdout, final)) kda_die("kda generate: writing to stdout failed");
}

static int on_token(int32_t id, void *arg) {
    streamer *s = arg;
    if (s->print_ids) {
        if (printf(s->n_out++ ? " %d" : "%d", id) < 0) kda_die("kda generate: writing to stdout failed");
        fflush(stdout);
        return 0;
    }
    if (id == s->eos) return 0;
    codec_bytes(s->c, id, &s->out.pend);
    emit(s, 0);
    return 0;
}

// ---- the model ----------------------------------------------------------------------------------

// The checkpoint's config (or --config's, or the built-in one), then --set and --device; its
// tokenizer (or --tokenizer).
static void load(const gen_opts *o, kda_loaded *ld) {
    kda_load_spec spec = {.who = "kda generate",
                          .ckpt = o->ckpt,
                          .config = o->config,
                          .sets = o->sets,
                          .n_sets = o->n_sets,
                          .device = o->device,
                          .tokenizer = o->tokenizer,
                          .init_seed = (uint64_t)o->init_seed};
    kda_loaded_open(ld, &spec);
}

int cmd_generate(int argc, char **argv) {
    gen_opts o;
    parse_args(argc, argv, &o);
    char **file_prompts = NULL;
    int n_file = 0;
    if (o.prompt_file) read_prompt_file(&o, &file_prompts, &n_file);
    int n_prompts = o.n_prompts + n_file;
    if (n_prompts == 0) kda_die("kda generate: no prompt: give --prompt TEXT or --prompt-file PATH");

    kda_loaded ld;
    load(&o, &ld);
    const kda_config *cfg = &ld.cfg;
    codec cd;
    codec_open(&cd, cfg, ld.tok);
    // every prompt's ids first: the longest sizes the prefill block
    kda_tok_ids *pids = kda_calloc((size_t)n_prompts, sizeof(kda_tok_ids));
    int longest = 1;
    for (int p = 0; p < n_prompts; p++) {
        const char *text = p < o.n_prompts ? o.prompts[p] : file_prompts[p - o.n_prompts];
        kda_tok_ids *ids = &pids[p];
        codec_encode(&cd, text, ids);
        if (ids->n == 0)
            kda_die("kda generate: prompt %d is empty and the config has no bos_token_id: give some text", p + 1);
        for (size_t i = 0; i < ids->n; i++)
            if (ids->v[i] >= cfg->vocab_size)
                kda_die("kda generate: prompt %d has token id %d, outside the model's vocabulary of %d: the tokenizer "
                        "does not match the model",
                        p + 1, ids->v[i], cfg->vocab_size);
        if ((long)ids->n > longest) longest = ids->n > KDA_GEN_BLOCK ? KDA_GEN_BLOCK : (int)ids->n;
    }
    kda_model *m = kda_loaded_model(&ld, 1, longest); // activations for one sequence of the longest prefill block
    if (o.show_stats)
        fprintf(stderr, "kda generate: %zu parameters, backend %s, prefill blocks of up to %d tokens\n",
                kda_model_num_params(m), m->ops->name, longest);
    kda_decoder *dec = kda_decoder_create(m, 0);
    kda_sampler *smp = kda_sampler_create(cfg->vocab_size, &o.samp, o.have_seed ? o.seed : (uint64_t)cfg->seed);
    streamer st = {.c = &cd, .eos = cfg->eos_token_id, .print_ids = o.print_ids};
    for (int p = 0; p < n_prompts; p++) {
        const char *text = p < o.n_prompts ? o.prompts[p] : file_prompts[p - o.n_prompts];
        kda_tok_ids ids = pids[p];
        st.n_out = 0;
        if (o.echo && !o.print_ids) {
            fputs(text, stdout);
            fflush(stdout);
        }
        kda_gen_stats gs;
        kda_generate(dec, smp, ids.v, (int)ids.n, (int)o.max_new, cfg->eos_token_id, on_token, &st, &gs);
        emit(&st, 1);
        putchar('\n');
        fflush(stdout);
        if (o.show_stats) {
            double rate = gs.new_tokens > 1 && gs.decode_s > 0 ? (gs.new_tokens - 1) / gs.decode_s : 0;
            fprintf(stderr,
                    "[prompt %d] %d prompt tokens, prefill %.1f ms (%.0f tokens/s), first token after %.1f ms, "
                    "%d new tokens, %.1f tokens/s%s, state %zu bytes\n",
                    p + 1, gs.prompt_tokens, gs.prefill_s * 1e3, gs.prefill_s > 0 ? gs.prompt_tokens / gs.prefill_s : 0,
                    gs.first_token_s * 1e3, gs.new_tokens, rate, gs.stopped_at_eos ? ", stopped at end of text" : "",
                    kda_decoder_state_bytes(dec));
        }
    }
    for (int p = 0; p < n_prompts; p++) kda_tok_ids_free(&pids[p]);
    free(pids);
    kda_utf8_stream_free(&st.out);
    kda_sampler_free(smp);
    kda_decoder_free(dec);
    codec_close(&cd);
    kda_loaded_close(&ld);
    for (int i = 0; i < n_file; i++) free(file_prompts[i]);
    free(file_prompts);
    free(o.prompts);
    return 0;
}
