# llmd — top-level build.
#
# Every folder with C sources becomes one static library (build/lib/lib<dir>.a);
# tools link those; each tests/unit/test_*.c is its own Check runner.  New
# source files are picked up by wildcard, so adding a file needs no edit here.

VERSION := $(shell cat VERSION)
BUILD   ?= build
CC      ?= gcc
NVCC    ?= $(shell command -v nvcc 2>/dev/null || echo /usr/local/cuda/bin/nvcc)
CUDA    ?= $(shell test -x "$(NVCC)" && echo 1 || echo 0)
CUDA_ARCHS ?= 80 90
MODEL   ?= models/SmolLM2-135M-Instruct.Q4_1.gguf
VOCABS  := $(addprefix models/vocab/ggml-vocab-,llama-spm.gguf llama-bpe.gguf qwen2.gguf)

PKGS     := jansson libpcre2-8 openblas libevent libevent_openssl libevent_pthreads openssl \
	sqlite3 libsystemd ncursesw
PKG_CFLAGS := $(shell pkg-config --cflags $(PKGS) 2>/dev/null)
PKG_LIBS   := $(shell pkg-config --libs $(PKGS) 2>/dev/null)
CHECK_LIBS := $(shell pkg-config --libs check 2>/dev/null)

OPT      ?= -O2
WARN     := -Wall -Wextra -Werror -Wshadow -Wno-unused-parameter
CFLAGS   ?=
ALL_CFLAGS := -std=c11 -D_GNU_SOURCE -g $(OPT) $(WARN) -fopenmp -pthread \
	-I. $(PKG_CFLAGS) -DLLMD_VERSION='"$(VERSION)"' $(CFLAGS)
LDLIBS   := $(PKG_LIBS) -fopenmp -pthread -ldl -lm

# Library folders in link order: a folder may only use folders after it.
# A folder's main.c is its program's entry point, kept out of its library.
LIBDIRS  := admin daemon engine sched swap model kvcache kernels kernels/cpu db
LIBDIRS  := $(foreach d,$(LIBDIRS),$(if $(wildcard $(d)/*.c),$(d)))
libname   = $(BUILD)/lib/lib$(subst /,_,$(1)).a
LIBS     := $(foreach d,$(LIBDIRS),$(call libname,$(d)))

TOOLS    := llmgen llmbench
PROGS    := llmd llmadmin
BINS     := $(addprefix $(BUILD)/bin/,$(TOOLS) $(PROGS))
TESTS    := $(patsubst tests/unit/%.c,%,$(wildcard tests/unit/test_*.c))
# Helpers shared by the suites (tests/unit/util_*.c) are linked into each.
TEST_UTIL := $(patsubst %.c,$(BUILD)/obj/%.o,tests/unit/check_main.c $(wildcard tests/unit/util_*.c))

.PHONY: all test unit compat asan lint deps model run clean cuda fuzz bench format
all: $(BINS) $(if $(filter 1,$(CUDA)),cuda)

# --- objects and libraries --------------------------------------------------
$(BUILD)/obj/%.o: %.c
	@mkdir -p $(dir $@)
	$(CC) $(ALL_CFLAGS) -MMD -MP -c $< -o $@

define lib_rule
$(call libname,$(1)): $(patsubst %.c,$(BUILD)/obj/%.o,$(filter-out $(1)/main.c,$(wildcard $(1)/*.c)))
	@mkdir -p $$(dir $$@)
	rm -f $$@ && ar rcs $$@ $$^
endef
$(foreach d,$(LIBDIRS),$(eval $(call lib_rule,$(d))))

# The programs: llmd is daemon/main.c, llmadmin is admin/main.c, over the libraries.
$(BUILD)/bin/llmd: $(BUILD)/obj/daemon/main.o $(LIBS)
	@mkdir -p $(dir $@)
	$(CC) $(ALL_CFLAGS) -o $@ $< $(LIBS) $(LDLIBS)
$(BUILD)/bin/llmadmin: $(BUILD)/obj/admin/main.o $(LIBS)
	@mkdir -p $(dir $@)
	$(CC) $(ALL_CFLAGS) -o $@ $< $(LIBS) $(LDLIBS)

# A tool is tools/NAME.c plus any tools/NAME_*.c beside it.
.SECONDEXPANSION:
$(BUILD)/bin/%: $(BUILD)/obj/tools/%.o \
		$$(addprefix $(BUILD)/obj/,$$(subst .c,.o,$$(wildcard tools/$$*_*.c))) $(LIBS)
	@mkdir -p $(dir $@)
	$(CC) $(ALL_CFLAGS) -o $@ $(filter %.o,$^) $(LIBS) $(LDLIBS)

# --- tests -------------------------------------------------------------------
$(BUILD)/tests/%: $(BUILD)/obj/tests/unit/%.o $(TEST_UTIL) $(LIBS)
	@mkdir -p $(dir $@)
	$(CC) $(ALL_CFLAGS) -o $@ $< $(TEST_UTIL) $(LIBS) $(LDLIBS) $(CHECK_LIBS)

# test_llmbench also links llmbench's parts (all but its main).
LB_OBJS := $(patsubst %.c,$(BUILD)/obj/%.o,$(wildcard tools/llmbench_*.c))
$(BUILD)/tests/test_llmbench: $(BUILD)/obj/tests/unit/test_llmbench.o $(LB_OBJS) $(TEST_UTIL) $(LIBS)
	@mkdir -p $(dir $@)
	$(CC) $(ALL_CFLAGS) -o $@ $< $(LB_OBJS) $(TEST_UTIL) $(LIBS) $(LDLIBS) $(CHECK_LIBS)

# Integration suites start the llmd and llmadmin of the same build.
unit: $(addprefix $(BUILD)/tests/,$(TESTS)) $(BINS) $(MODEL) $(VOCABS)
	@fail=0; for t in $(TESTS); do \
	  echo "== $$t"; LLMD_MODEL=$(MODEL) LLMD_BIN_DIR=$(BUILD)/bin $(BUILD)/tests/$$t || fail=1; \
	done; exit $$fail

# Compatibility: the official openai Python SDK and curl against a live llmd.
compat: $(BINS) $(MODEL)
	@sh tests/compat/run.sh $(BUILD)/bin $(MODEL)

# The whole suite: unit + integration suites, compatibility with real
# clients, then the suites again under ASan/UBSan.
test: all unit compat asan

asan:
	ASAN_OPTIONS=detect_leaks=1:abort_on_error=0 UBSAN_OPTIONS=print_stacktrace=1 \
	$(MAKE) --no-print-directory BUILD=build/asan OPT=-O1 CUDA=0 \
	  CFLAGS="-fsanitize=address,undefined -fno-sanitize-recover=undefined -fno-omit-frame-pointer" \
	  unit

# --- benchmarks (not part of test) --------------------------------------------
# bench/REPORT.md: llmd beside llama.cpp's llama-server under the scenarios
# of bench/scenarios/, with llmbench.  SOAK_S shortens the soak (default an hour).
SOAK_S ?= 3600
bench: all $(MODEL)
	python3 scripts/bench.py --bin $(BUILD)/bin --model $(MODEL) --soak-s $(SOAK_S) \
	  --out build/bench --report bench/REPORT.md

# --- CUDA backend (shared object, loaded at run time) ------------------------
CUDA_SRCS := $(wildcard kernels/cuda/*.cu)
CUDA_GENCODE := $(foreach a,$(CUDA_ARCHS),-gencode arch=compute_$(a),code=sm_$(a))
cuda: $(BUILD)/lib/libllmd_cuda.so
$(BUILD)/lib/libllmd_cuda.so: $(CUDA_SRCS) kernels/backend.h
	@mkdir -p $(dir $@)
	$(NVCC) -O2 -std=c++17 -I. $(CUDA_GENCODE) -Xcompiler -fPIC,-Wall,-Werror \
	  -shared -o $@ $(CUDA_SRCS) -lcublas -lcudart

# --- fuzzing (clang + libFuzzer) ---------------------------------------------
fuzz: $(BUILD)/fuzz/fuzz_gguf
$(BUILD)/fuzz/fuzz_gguf: tests/fuzz/fuzz_gguf.c model/gguf.c model/dequant.c model/model.h
	@mkdir -p $(dir $@)
	clang -std=c11 -D_GNU_SOURCE -g -O1 -I. -fsanitize=fuzzer,address,undefined \
	  -o $@ tests/fuzz/fuzz_gguf.c model/gguf.c model/dequant.c

# --- housekeeping ------------------------------------------------------------
SRC_FILES = $(shell git ls-files '*.c' '*.h' '*.cu' 2>/dev/null)
lint:
	clang-format --dry-run --Werror $(SRC_FILES)
	cppcheck --quiet --error-exitcode=1 --enable=warning,performance,portability \
	  --inline-suppr --suppress=missingIncludeSystem -I. -D__GNUC__ \
	  $(filter %.c,$(SRC_FILES))
	$(MAKE) --no-print-directory OPT=-O2 all

format:
	clang-format -i $(SRC_FILES)

deps:
	@sh scripts/deps.sh

model: $(MODEL) $(VOCABS)
$(MODEL):
	@sh scripts/fetch-model.sh $@
$(VOCABS):
	@sh scripts/fetch-vocab.sh models/vocab

run: all $(MODEL)
	@sh scripts/run.sh $(MODEL)

clean:
	rm -rf build

-include $(shell find $(BUILD)/obj -name '*.d' 2>/dev/null)

# --- packaging (make deb, make rpm; see packaging/) ----------------------------
-include packaging/*.mk
# Lintian, rpm -qpl, the unit verified, the .deb installed, serving and purged
# (as root; .ci/run runs it after make test).
.PHONY: test-packaging
test-packaging: test-packaging-deb test-packaging-rpm
