// clock_watch.cu — cuda_info.h's clock watch: the GPU's SM clock, power draw and clock-limit
// reasons sampled while kda bench times its steps (ops.h clock_watch), and the board's energy
// counter read at both ends (joules a step: under the power cap, what a faster step must save). A
// step whose GEMMs and KDA kernels run 13-15% slower than the same kernels alone may be held back
// by the board's power cap; this says so without a profiler. Through NVML (the driver's management
// library: the only source of these counters), opened at run time with dlopen so that kda neither
// links against it nor needs it: where it is missing or fails, the watch reports nothing. One
// sampling thread, every 10 ms, up to CW_MAX samples.
#include <dlfcn.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "backend/cuda/cuda_common.cuh"

extern "C" {
#include "backend/cuda/cuda_info.h"
}

// NVML's C interface, the few calls used (nvml.h, stable since CUDA 5; _v2 names as exported)
typedef int nvml_ret; // 0: NVML_SUCCESS
typedef struct nvml_dev_st *nvml_dev;
enum { NVML_CLOCK_SM = 1, NVML_REASON_SW_POWER_CAP = 0x4, NVML_REASON_HW_SLOWDOWN = 0x8,
       NVML_REASON_SW_THERMAL = 0x20, NVML_REASON_HW_THERMAL = 0x40, NVML_REASON_HW_POWER_BRAKE = 0x80 };
static struct {
    nvml_ret (*init)(void);
    nvml_ret (*by_pci)(const char *bus_id, nvml_dev *dev);
    nvml_ret (*clock)(nvml_dev dev, int type, unsigned *mhz);
    nvml_ret (*max_clock)(nvml_dev dev, int type, unsigned *mhz);
    nvml_ret (*power)(nvml_dev dev, unsigned *milliwatts);
    nvml_ret (*power_limit)(nvml_dev dev, unsigned *milliwatts);
    nvml_ret (*reasons)(nvml_dev dev, unsigned long long *mask);
    nvml_ret (*energy)(nvml_dev dev, unsigned long long *millijoules); // since the driver loaded
    nvml_dev dev;
    int state; // 0: not tried, 1: ready, −1: not available
} nvml;

// NVML for this process's GPU (matched by PCI bus id), once; false where it is not available.
static bool nvml_ready(void) {
    if (nvml.state) return nvml.state > 0;
    nvml.state = -1;
    void *h = dlopen("libnvidia-ml.so.1", RTLD_NOW | RTLD_LOCAL);
    if (!h) return false;
    *(void **)&nvml.init = dlsym(h, "nvmlInit_v2");
    *(void **)&nvml.by_pci = dlsym(h, "nvmlDeviceGetHandleByPciBusId_v2");
    *(void **)&nvml.clock = dlsym(h, "nvmlDeviceGetClockInfo");
    *(void **)&nvml.max_clock = dlsym(h, "nvmlDeviceGetMaxClockInfo");
    *(void **)&nvml.power = dlsym(h, "nvmlDeviceGetPowerUsage");
    *(void **)&nvml.power_limit = dlsym(h, "nvmlDeviceGetEnforcedPowerLimit");
    *(void **)&nvml.reasons = dlsym(h, "nvmlDeviceGetCurrentClocksEventReasons"); // newer drivers' name
    if (!nvml.reasons) *(void **)&nvml.reasons = dlsym(h, "nvmlDeviceGetCurrentClocksThrottleReasons");
    *(void **)&nvml.energy = dlsym(h, "nvmlDeviceGetTotalEnergyConsumption"); // optional, Volta and later
    if (!nvml.init || !nvml.by_pci || !nvml.clock || !nvml.max_clock || !nvml.power || !nvml.power_limit)
        return false; // without the reasons (optional) the shares of capped samples stay 0
    int d;
    char bus[32];
    if (cudaGetDevice(&d) != cudaSuccess || cudaDeviceGetPCIBusId(bus, (int)sizeof bus, d) != cudaSuccess) {
        (void)cudaGetLastError();
        return false;
    }
    if (nvml.init() != 0 || nvml.by_pci(bus, &nvml.dev) != 0) return false;
    nvml.state = 1;
    return true;
}

enum { CW_MAX = 1 << 16, CW_PERIOD_NS = 10 * 1000 * 1000 };
static struct {
    pthread_t thread;
    int run; // read by the sampler, written by the caller: __atomic
    int n, running;
    unsigned long long mj0; // the energy counter at start (0: none)
    double t0;              // seconds at start
    unsigned mhz[CW_MAX], mw[CW_MAX];
    unsigned long long why[CW_MAX];
} cw;

static void *cw_sample(void *arg) {
    (void)arg;
    struct timespec pause = {0, CW_PERIOD_NS};
    while (__atomic_load_n(&cw.run, __ATOMIC_ACQUIRE) && cw.n < CW_MAX) { // CW_MAX: ~11 minutes of samples
        unsigned mhz = 0, mw = 0;
        unsigned long long why = 0;
        if (nvml.reasons && nvml.reasons(nvml.dev, &why) != 0) why = 0;
        if (nvml.clock(nvml.dev, NVML_CLOCK_SM, &mhz) == 0 && nvml.power(nvml.dev, &mw) == 0)
            cw.mhz[cw.n] = mhz, cw.mw[cw.n] = mw, cw.why[cw.n] = why, cw.n++;
        nanosleep(&pause, NULL);
    }
    return NULL;
}

// The board's energy counter in millijoules, 0 where the driver has none for it.
static unsigned long long energy_mj(void) {
    unsigned long long mj = 0;
    if (!nvml.energy || nvml.energy(nvml.dev, &mj) != 0) return 0;
    return mj;
}

static int cmp_unsigned(const void *a, const void *b) {
    unsigned x = *(const unsigned *)a, y = *(const unsigned *)b;
    return (x > y) - (x < y);
}

extern "C" void kda_cuda_clock_watch(int start, kda_clock_stats *out) {
    if (start) {
        if (cw.running || !nvml_ready()) return;
        cw.n = 0;
        cw.mj0 = energy_mj(), cw.t0 = kda_now();
        __atomic_store_n(&cw.run, 1, __ATOMIC_RELEASE);
        cw.running = pthread_create(&cw.thread, NULL, cw_sample, NULL) == 0;
        return;
    }
    if (out) memset(out, 0, sizeof *out);
    if (!cw.running) return;
    unsigned long long mj1 = energy_mj();
    double t1 = kda_now();
    __atomic_store_n(&cw.run, 0, __ATOMIC_RELEASE);
    pthread_join(cw.thread, NULL);
    cw.running = 0;
    if (!out || !cw.n) return;
    if (cw.mj0 && mj1 > cw.mj0) out->energy_j = (double)(mj1 - cw.mj0) / 1e3;
    out->watch_s = t1 - cw.t0;
    int n = cw.n, capped = 0, slowed = 0;
    for (int i = 0; i < n; i++) {
        capped += (cw.why[i] & NVML_REASON_SW_POWER_CAP) != 0;
        slowed += (cw.why[i] & (NVML_REASON_HW_SLOWDOWN | NVML_REASON_SW_THERMAL | NVML_REASON_HW_THERMAL |
                                NVML_REASON_HW_POWER_BRAKE)) != 0;
    }
    out->samples = n;
    out->power_capped = (double)capped / n;
    out->thermal_or_hw = (double)slowed / n;
    qsort(cw.mhz, n, sizeof(unsigned), cmp_unsigned);
    qsort(cw.mw, n, sizeof(unsigned), cmp_unsigned);
    out->sm_mhz_median = cw.mhz[n / 2], out->sm_mhz_min = cw.mhz[0];
    out->power_w_median = cw.mw[n / 2] / 1000.0, out->power_w_max = cw.mw[n - 1] / 1000.0;
    unsigned mx = 0, lim = 0;
    if (nvml.max_clock(nvml.dev, NVML_CLOCK_SM, &mx) == 0) out->sm_mhz_max = mx;
    if (nvml.power_limit(nvml.dev, &lim) == 0) out->power_limit_w = lim / 1000.0;
}
