// backend.c — backend selection: the one place that maps a device name to an op table.
// (What differs between backends is a capability field of kda_ops, never tested by name.)
#include <stdio.h>
#include <string.h>

#include "base/common.h"
#include "model/ops.h"

static char backend_reason[640];

const char *kda_backend_reason(void) { return backend_reason; }

const kda_ops *kda_pick_backend(const char *device) {
    const char *why = NULL;
    snprintf(backend_reason, sizeof backend_reason, "device %s", device);
    if (!strcmp(device, "cpu")) return kda_ops_cpu();
    const kda_ops *cu = kda_ops_cuda(&why);
    if (cu) return cu;
    if (!strcmp(device, "cuda"))
        kda_die("device 'cuda' requested but unavailable: %s; use --device cpu", why ? why : "unknown reason");
    snprintf(backend_reason, sizeof backend_reason, "device auto fell back to the CPU: %s",
             why ? why : "no usable GPU");
    return kda_ops_cpu();
}

const kda_ops *kda_pick_backend_for_plan(const char *device) {
    const char *why = NULL;
    if (strcmp(device, "cuda") || kda_ops_cuda(&why)) return kda_pick_backend(device);
    const kda_ops *sizes = kda_ops_cuda_sizing();
    if (!sizes) return kda_pick_backend(device); // dies naming the reason
    snprintf(backend_reason, sizeof backend_reason, "device cuda: no usable GPU here (%s): its sizes, not checked",
             why ? why : "unknown reason");
    return sizes;
}
