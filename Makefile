# kda — build: `make` builds ./kda; `make test` runs every test; `make demo` trains the tiny
# model on the bundled corpus. Sources are found by wildcard: a new src/<x>.c or
# tests/test_<x>.c needs no Makefile edit.

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

LIB_SRC  := $(filter-out src/main.c,$(wildcard src/*.c src/*/*.c))
LIB_OBJ  := $(LIB_SRC:%.c=$(BUILD)/%.o)
TEST_SRC := $(wildcard tests/test_*.c)
TEST_BIN := $(TEST_SRC:tests/%.c=$(BUILD)/tests/%)
TOOL_SRC := $(wildcard tests/tools/*.c)
TOOL_BIN := $(TOOL_SRC:tests/tools/%.c=$(BUILD)/tools/%)
BENCH_SRC := $(wildcard bench/*.c)
BENCH_BIN := $(BENCH_SRC:bench/%.c=$(BUILD)/bench/%)

.PHONY: all deps test test-c test-san test-py demo bench clean cuda
all: deps-check kda

deps-check:
	@tools/deps.sh check

deps:
	@tools/deps.sh install

kda: $(BUILD)/kda
	@if [ "$(BUILD)" = build ]; then cp $(BUILD)/kda ./kda; fi

$(BUILD)/kda: $(BUILD)/src/main.o $(BUILD)/libkda.a
	$(CC) $(CFLAGS) $(LDFLAGS) -o $@ $^ $(LDLIBS)

$(BUILD)/libkda.a: $(LIB_OBJ)
	@rm -f $@
	ar rcs $@ $^

$(BUILD)/%.o: %.c $(wildcard src/*.h src/*/*.h tests/*.h)
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

demo: all
	./kda train configs/tiny.yaml

clean:
	rm -rf build build-san kda
