# kda — build: `make` builds ./kda; `make test` runs every test; `make demo` tokenizes the
# bundled corpus and trains the tiny demo model on it. Sources are found by wildcard: a new
# src/<x>.c or tests/test_<x>.c needs no Makefile edit.

CC       ?= gcc
NVCC     ?= nvcc
BUILD    ?= build
SAN      ?= 0
OPT      ?= -O2 -march=x86-64-v2
WERROR   ?= -Werror
# MPI flags are asked of mpicc when a recipe first needs them, not when this file is read: on a
# fresh machine the deps step (tools/deps.sh, an order-only prerequisite of every object) installs
# OpenMPI during the build, and a parse-time query would have found nothing (tests/cli/test_build_fresh.sh).
# CFLAGS and LDLIBS are therefore recursively expanded ('='); the query runs once, then is cached.
MPICC    ?= mpicc
DEPS_SH  ?= tools/deps.sh
MPI_CFLAGS = $(eval MPI_CFLAGS := $(shell $(MPICC) --showme:compile 2>/dev/null))$(MPI_CFLAGS)
MPI_LIBS   = $(eval MPI_LIBS := $(shell $(MPICC) --showme:link 2>/dev/null))$(MPI_LIBS)
CFLAGS   = -std=c11 $(OPT) -g -Wall -Wextra $(WERROR) -fopenmp -D_GNU_SOURCE -Isrc -Itests -Ibuild/gen $(MPI_CFLAGS)
LDLIBS   = $(MPI_LIBS) -lyaml -lopenblas -lpcre2-8 -ljansson -lzstd -lz -lsnappy -lm -lpthread
ifeq ($(SAN),1)
  BUILD  := build-san
  CFLAGS += -fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=undefined -O1
  LDFLAGS += -fsanitize=address,undefined
endif

FUZZ     ?= 0
ifeq ($(FUZZ),1)
  BUILD  := build-fuzz
  CC     := clang
  WERROR :=
  CFLAGS += -fsanitize=fuzzer-no-link,address,undefined -O1
  LDFLAGS += -fsanitize=address,undefined
endif

LIB_SRC  := $(filter-out src/cli/main.c,$(wildcard src/*/*.c src/*/*/*.c))
LIB_OBJ  := $(LIB_SRC:%.c=$(BUILD)/%.o)
TEST_SRC := $(wildcard tests/test_*.c)
TEST_BIN := $(TEST_SRC:tests/%.c=$(BUILD)/tests/%)
TOOL_SRC := $(wildcard tests/tools/*.c)
TOOL_BIN := $(TOOL_SRC:tests/tools/%.c=$(BUILD)/tools/%)
BENCH_SRC := $(wildcard bench/*.c)
BENCH_BIN := $(BENCH_SRC:bench/%.c=$(BUILD)/bench/%)

.PHONY: all deps deps-check test test-c test-san test-py demo bench clean cuda cuda-device-bins device-bins format
all: deps-check kda

# ---- CUDA backend (docs/cuda.md): src/backend/cuda/*.cu when nvcc is on PATH, else src/backend/cuda/*_stub.c.
# The .cu objects carry no sanitizer, so build/ and build-san/ share them (compiled once).
# tests/cuda/test_cuda_*.c become $(BUILD)/tests/test_cuda_* (they print SKIP without a GPU);
# `make cuda-device-bins` links tests/cuda/*.c for the GPU machine (libyaml/snappy static).
CUDA_TEST_SRC := $(wildcard tests/cuda/test_cuda_*.c)
TEST_BIN += $(CUDA_TEST_SRC:tests/cuda/%.c=$(BUILD)/tests/%)
# CUDA_ARCHS: the GPUs to build native code for, as compute capabilities without the dot (80 A100,
# 86 RTX 30xx, 89 RTX 40xx / L40S, 90a H100 / H200 with Hopper's own instructions, 100 B200);
# CUDA_PTX: the virtual architecture whose PTX is embedded too, for cards newer than the list
# (the driver compiles it at start). `make CUDA_ARCHS=90a` builds quicker for one card;
# `make CUDA_ARCHS= CUDA_PTX=80` builds only portable PTX (what an A100-class card runs).
comma := ,
CUDA_ARCHS ?= 80 86 89 90a 100
CUDA_PTX   ?= $(patsubst %a,%,$(lastword $(CUDA_ARCHS)))
CUDA_TAG   := $(subst $(eval) ,-,$(strip $(CUDA_ARCHS)))+ptx$(CUDA_PTX)
CU_DIR     := build/cu-$(CUDA_TAG)
ifneq ($(shell command -v $(NVCC) 2>/dev/null),)
  CUDA_HOME ?= $(patsubst %/bin/,%,$(dir $(shell command -v $(NVCC))))
  CU_OBJ    := $(patsubst src/backend/cuda/%.cu,$(CU_DIR)/%.o,$(wildcard src/backend/cuda/*.cu))
  LIB_OBJ   := $(filter-out $(BUILD)/src/backend/cuda/%_stub.o,$(LIB_OBJ)) $(CU_OBJ)
  CFLAGS    += -DKDA_HAVE_CUDA
  GENCODE   := $(foreach a,$(CUDA_ARCHS),-gencode=arch=compute_$(a),code=sm_$(a)) \
               $(if $(CUDA_PTX),-gencode=arch=compute_$(CUDA_PTX)$(comma)code=compute_$(CUDA_PTX))
  NVFLAGS   := $(GENCODE) -O3 -std=c++17 -g -lineinfo -Xcompiler -Wall,-Wextra,-Werror -Isrc -DKDA_HAVE_CUDA \
               -DKDA_CUDA_ARCHS='"$(strip $(CUDA_ARCHS)) + PTX $(CUDA_PTX)"'
  CUDA_LIBS := -L$(CUDA_HOME)/lib64 -Wl,-rpath,$(CUDA_HOME)/lib64 -lcublasLt -lcublas -lcudart -lstdc++
  LDLIBS    += $(CUDA_LIBS)
$(CU_DIR)/%.o: src/backend/cuda/%.cu $(wildcard src/*/*.h src/backend/cuda/*.cuh src/backend/cuda/*.h)
	@mkdir -p $(dir $@)
	$(NVCC) $(NVFLAGS) -c -o $@ $<
endif
$(BUILD)/tests/test_cuda_%: tests/cuda/test_cuda_%.c $(BUILD)/libkda.a $(wildcard tests/*.h tests/cuda/*.h)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) $(LDFLAGS) -o $@ $< $(BUILD)/libkda.a $(LDLIBS)
# Programs for the GPU machine (libyaml and snappy linked statically: it lacks them), in DEVICE_DIR.
DEVICE_DIR ?= build/cuda-device
DEVICE_LIBS = -Wl,--as-needed $(MPI_LIBS) -Wl,-Bstatic -lyaml -lsnappy -Wl,-Bdynamic \
  -lopenblas -lpcre2-8 -ljansson -lzstd -lz -lm -lpthread $(CUDA_LIBS)
CUDA_DEVICE_BIN := $(patsubst tests/cuda/%.c,$(DEVICE_DIR)/%,$(wildcard tests/cuda/*.c)) $(DEVICE_DIR)/kda \
  $(DEVICE_DIR)/dump_batches
cuda-device-bins: $(CUDA_DEVICE_BIN)
# Both sets the device scripts use: native Hopper code (build/cuda-device) and portable compute_80
# PTX only (build/cuda-device-ptx80: the code path of A100-class cards, run on the H200).
device-bins:
	$(MAKE) BUILD=build/dev-sm90a CUDA_ARCHS=90a CUDA_PTX= DEVICE_DIR=build/cuda-device cuda-device-bins
	$(MAKE) BUILD=build/dev-ptx80 CUDA_ARCHS= CUDA_PTX=80 DEVICE_DIR=build/cuda-device-ptx80 cuda-device-bins
	tools/build_info.sh > build/cuda-device/BUILD_INFO
	cp build/cuda-device/BUILD_INFO build/cuda-device-ptx80/BUILD_INFO
$(DEVICE_DIR)/kda: $(BUILD)/src/cli/main.o $(BUILD)/libkda.a
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -o $@ $^ $(DEVICE_LIBS)
# the batches kda train consumes, for bench/parity_vs_fla.sh on the GPU machine
$(DEVICE_DIR)/dump_batches: tests/tools/dump_batches.c $(BUILD)/libkda.a
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -o $@ $^ $(DEVICE_LIBS)
# the benchmarks time with CUDA events (cuda_bench.h: the runtime's C header)
$(DEVICE_DIR)/bench_%: CFLAGS += -I$(CUDA_HOME)/include
$(DEVICE_DIR)/%: tests/cuda/%.c $(BUILD)/libkda.a $(wildcard tests/*.h tests/cuda/*.h)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -o $@ $< $(BUILD)/libkda.a $(DEVICE_LIBS)

# build/gen/kda_build.h: release, commit and CUDA archs for `kda --version` (rewritten only on change)
BUILD_H_CUDA := $(if $(shell command -v $(NVCC) 2>/dev/null),$(strip $(CUDA_ARCHS)) + PTX $(CUDA_PTX))
build/gen/kda_build.h: FORCE
	@tools/gen_build_h.sh $@ "$(BUILD_H_CUDA)"
FORCE:
$(BUILD)/src/base/version.o: build/gen/kda_build.h

deps-check:
	@$(DEPS_SH) check

deps:
	@$(DEPS_SH) install

# Every compile and link waits for the deps step (order-only: it never makes anything out of date),
# so that under make -j no recipe expands the MPI flags before OpenMPI is there.
$(LIB_OBJ) $(BUILD)/src/cli/main.o $(TEST_BIN) $(TOOL_BIN) $(BENCH_BIN): | deps-check

kda: $(BUILD)/kda
	@if [ "$(BUILD)" = build ]; then cp $(BUILD)/kda ./kda.tmp && mv -f ./kda.tmp ./kda; fi  # rename: works while ./kda runs

$(BUILD)/kda: $(BUILD)/src/cli/main.o $(BUILD)/libkda.a
	$(CC) $(CFLAGS) $(LDFLAGS) -o $@ $^ $(LDLIBS)

$(BUILD)/libkda.a: $(LIB_OBJ)
	@rm -f $@
	ar rcs $@ $^

$(BUILD)/%.o: %.c $(wildcard src/*/*.h src/*/*/*.h tests/*.h)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -c -o $@ $<

$(BUILD)/tests/%: tests/%.c $(BUILD)/libkda.a $(wildcard tests/*.h)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) $(LDFLAGS) -o $@ $< $(BUILD)/libkda.a $(LDLIBS)

$(BUILD)/tools/%: tests/tools/%.c $(BUILD)/libkda.a
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) $(LDFLAGS) -o $@ $< $(BUILD)/libkda.a $(LDLIBS)

$(BUILD)/bench/%: bench/%.c $(BUILD)/libkda.a
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) $(LDFLAGS) -o $@ $< $(BUILD)/libkda.a $(LDLIBS)

test-bins: $(TEST_BIN) $(TOOL_BIN)

FUZZ_SRC := $(wildcard tests/fuzz/fuzz_*.c)
FUZZ_BIN := $(FUZZ_SRC:tests/fuzz/%.c=$(BUILD)/fuzz/%)
$(BUILD)/fuzz/%: tests/fuzz/%.c $(BUILD)/libkda.a
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -fsanitize=fuzzer $(LDFLAGS) -o $@ $< $(BUILD)/libkda.a $(LDLIBS)
# libFuzzer targets (clang): make FUZZ=1 fuzz-bins
fuzz-bins: $(FUZZ_BIN)

# The whole suite: C tests, the same under ASan+UBSan, then parity tests against FLA & co.
test: deps-check
	@tests/run.sh

test-c: kda test-bins
test-bins-san:
	$(MAKE) SAN=1 test-bins

bench: kda $(BENCH_BIN)
	bench/run.sh

# The demo model (configs/tiny.yaml, the built-in default) trains on Llama 3 token files of the
# bundled corpus; `kda tokenize` makes them once (again only when the corpus or tokenizer change).
demo: all build/data/tinyshakespeare-llama3.idx
	./kda train configs/tiny.yaml

build/data/tinyshakespeare-llama3.idx: data/tinyshakespeare.txt data/tokenizer/llama3/tokenizer.json | kda
	./kda tokenize --input data/tinyshakespeare.txt --text-docs block --output-prefix build/data/tinyshakespeare-llama3 --force

clean:
	rm -rf build build-san kda

# the C and CUDA sources in the style of .clang-format (clang-format 14, Debian's). clang-format 14
# splits a launch whose configuration holds a '<' (`k<<<n, d < 256 ? ...>>>`) into code that does
# not compile: compute such a value before the launch.
FORMAT_SRC = $(shell git ls-files 'src/*.c' 'src/*.h' 'src/*.cu' 'src/*.cuh' 'tests/*.c' 'tests/*.h' 2>/dev/null)
format:
	clang-format -i --style=file $(FORMAT_SRC)
