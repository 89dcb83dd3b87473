// test_mem_plan.c — mem_plan's parameter count equals the real model's allocation (n_floats),
// for several small shapes, so the check before allocation measures what is then allocated.
#include <stdio.h>

#include "base/common.h"
#include "base/config.h"
#include "model/mem_plan.h"
#include "model/model.h"
#include "model/ops.h"
#include "test_util.h"

static void one(const char *what, const char *const *sets) {
    kda_config c;
    kda_config_defaults(&c);
    for (; *sets; sets++) kda_config_set(&c, *sets);
    kda_config_finalize(&c);
    const kda_ops *ops = kda_ops_cpu();
    kda_model *m = kda_model_create(&c, ops, 1, 8);
    kda_mem_plan p = kda_mem_plan_compute(&c, ops->w_bytes);
    T_CHECK(p.n_floats == m->n_floats, "%-28s plan %zu floats = model %zu", what, p.n_floats, m->n_floats);
    T_CHECK(p.state_bytes >= m->n_floats * (size_t)(16 + ops->w_bytes), "%-28s state %zu bytes covers 5 buffers", what,
            p.state_bytes);
    kda_model_free(m);
}

int main(void) {
    one("defaults (tiny)", (const char *const[]){"vocab_size=256", NULL});
    one("2 layers, odd sizes", (const char *const[]){"vocab_size=300", "hidden_size=40", "num_hidden_layers=2",
                                                      "num_heads=3", "head_dim=8", "intermediate_size=72", NULL});
    one("expand_v 2, conv 3", (const char *const[]){"vocab_size=256", "hidden_size=32", "num_heads=2", "head_dim=16",
                                                     "expand_v=2", "conv_size=3", NULL});
    T_CHECK(kda_mem_host_available() > 0, "MemAvailable read from /proc/meminfo: %zu bytes", kda_mem_host_available());
    return t_done("test_mem_plan");
}
