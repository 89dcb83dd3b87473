# kda — build: `make` builds ./kda; `make test` runs every test; `make demo` tokenizes the
# bundled corpus and trains the tiny demo model on it. Sources are found by wildcard: a new
# src/<x>.c or tests/test_<x>.c needs no Makefile edit.

CC       ?= gcc
NVCC     ?= nvcc
BUILD    ?= build
SAN      ?= 0
OPT      ?= -O2 -march=x86-64-v2
CFLAGS   := -std=c11 $(OPT) -g -Wall -Wextra -Werror -fopenmp -D_GNU_SOURCE -Isrc -Itests
MPI_CFLAGS := $(shell mpicc --showme:compile 2>/dev/null)
MPI_LIBS   := $(shell mpicc --showme:link 2>/dev/null)
CFLAGS   += $(MPI_CFLAGS)
LDLIBS   := $(MPI_LIBS) -lyaml -lopenblas -lpcre2-8 -ljansson -lzstd -lz -lsnappy -lm -lpthread
ifeq ($(SAN),1)
  BUILD  := build-san
  CFLAGS += -fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=undefined -O1
  LDFLAGS += -fsanitize=address,undefined
endif

FUZZ     ?= 0
ifeq ($(FUZZ),1)
  BUILD  := build-fuzz
  CC     := clang
  CFLAGS := $(filter-out -Werror,$(CFLAGS)) -fsanitize=fuzzer-no-link,address,undefined -O1
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

.PHONY: all deps test test-c test-san test-py demo bench clean cuda cuda-device-bins
all: deps-check kda

# ---- CUDA backend (docs/cuda.md): src/backend/cuda/*.cu when nvcc is on PATH, else src/backend/cuda/ops_cuda_stub.c.
# The .cu objects carry no sanitizer, so build/ and build-san/ share them (compiled once).
# tests/cuda/test_cuda_*.c become $(BUILD)/tests/test_cuda_* (they print SKIP without a GPU);
# `make cuda-device-bins` links tests/cuda/*.c for the GPU machine (libyaml/snappy static).
CUDA_TEST_SRC := $(wildcard tests/cuda/test_cuda_*.c)
TEST_BIN += $(CUDA_TEST_SRC:tests/cuda/%.c=$(BUILD)/tests/%)
ifneq ($(shell command -v $(NVCC) 2>/dev/null),)
  CUDA_HOME ?= $(patsubst %/bin/,%,$(dir $(shell command -v $(NVCC))))
  CU_OBJ    := $(patsubst %.cu,build/%.o,$(wildcard src/backend/cuda/*.cu))
  LIB_OBJ   := $(filter-out $(BUILD)/src/backend/cuda/ops_cuda_stub.o,$(LIB_OBJ)) $(CU_OBJ)
  CFLAGS    += -DKDA_HAVE_CUDA
  NVFLAGS   := -gencode=arch=compute_90a,code=sm_90a -O3 -std=c++17 -g -Xcompiler -Wall,-Wextra,-Werror -Isrc -DKDA_HAVE_CUDA
  CUDA_LIBS := -L$(CUDA_HOME)/lib64 -Wl,-rpath,$(CUDA_HOME)/lib64 -lcublasLt -lcublas -lcudart -lstdc++
  LDLIBS    += $(CUDA_LIBS)
build/src/backend/cuda/%.o: src/backend/cuda/%.cu $(wildcard src/*/*.h src/backend/cuda/*.cuh src/backend/cuda/*.h)
	@mkdir -p $(dir $@)
	$(NVCC) $(NVFLAGS) -c -o $@ $<
endif
$(BUILD)/tests/test_cuda_%: tests/cuda/test_cuda_%.c $(BUILD)/libkda.a $(wildcard tests/*.h tests/cuda/*.h)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) $(LDFLAGS) -o $@ $< $(BUILD)/libkda.a $(LDLIBS)
CUDA_DEVICE_BIN := $(patsubst tests/cuda/%.c,build/cuda-device/%,$(wildcard tests/cuda/*.c)) build/cuda-device/kda
cuda-device-bins: $(CUDA_DEVICE_BIN)
build/cuda-device/kda: build/src/cli/main.o build/libkda.a
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -o $@ $^ -Wl,--as-needed $(MPI_LIBS) -Wl,-Bstatic -lyaml -lsnappy -Wl,-Bdynamic \
	  -lopenblas -lpcre2-8 -ljansson -lzstd -lz -lm -lpthread $(CUDA_LIBS)
build/cuda-device/%: tests/cuda/%.c build/libkda.a $(wildcard tests/*.h tests/cuda/*.h)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -o $@ $< build/libkda.a -Wl,--as-needed $(MPI_LIBS) -Wl,-Bstatic -lyaml -lsnappy -Wl,-Bdynamic \
	  -lopenblas -lpcre2-8 -ljansson -lzstd -lz -lm -lpthread $(CUDA_LIBS)

deps-check:
	@tools/deps.sh check

deps:
	@tools/deps.sh install

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
	./kda tokenize --input data/tinyshakespeare.txt --text-docs block --output-prefix build/data/tinyshakespeare-llama3

clean:
	rm -rf build build-san kda
