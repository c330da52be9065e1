# ddl - plain Makefile, no configure step.
#   make                 build/libddl.a and the programs in build/bin/
#   make run             install what is missing, build, train LeNet on 2 local ranks
#   make test            install what is missing, build, run every test
#   make bench           benchmarks (long runs, peer comparisons)
# Switches: WITH_BLAS=openblas|none  WITH_ZMQ=0|1  WITH_MPI=0|1  WITH_LZ4=0|1
#           SAN=address|undefined|thread  V=1  BUILD=dir (default build)

BUILD     ?= build
WITH_BLAS ?= openblas
WITH_ZMQ  ?= $(if $(wildcard /usr/include/zmq.h),1,0)
WITH_MPI  ?= $(if $(shell command -v mpicc 2>/dev/null),1,0)
WITH_LZ4  ?= $(if $(wildcard /usr/include/lz4.h),1,0)
WITH_ZLIB ?= $(if $(wildcard /usr/include/zlib.h),1,0)

CC      ?= cc
CSTD    := -std=c11
WARN    := -Wall -Wextra -Wpedantic -Wshadow -Wstrict-prototypes -Wmissing-prototypes
OPT     ?= -O3 -march=x86-64-v2 -fno-math-errno
CFLAGS  ?= $(OPT) -g
ALL_CFLAGS = $(CSTD) $(WARN) $(CFLAGS) -D_GNU_SOURCE -I. -Isrc -MMD -MP
LDLIBS  := -lm -lpthread -lrt

ifeq ($(WITH_BLAS),openblas)
  ALL_CFLAGS += -DDDL_WITH_OPENBLAS -I/usr/include/x86_64-linux-gnu/openblas-pthread
  LDLIBS += -lopenblas
endif
ifeq ($(WITH_ZLIB),1)
  ALL_CFLAGS += -DDDL_WITH_ZLIB
  LDLIBS += -lz
endif
ifeq ($(WITH_LZ4),1)
  ALL_CFLAGS += -DDDL_WITH_LZ4
  LDLIBS += -llz4
endif
ifeq ($(WITH_ZMQ),1)
  ALL_CFLAGS += -DDDL_WITH_ZMQ
  LDLIBS += -lzmq
endif
ifeq ($(WITH_MPI),1)
  ALL_CFLAGS += -DDDL_WITH_MPI $(shell mpicc --showme:compile 2>/dev/null)
  LDLIBS += $(shell mpicc --showme:link 2>/dev/null)
endif
ifneq ($(SAN),)
  ALL_CFLAGS += -fsanitize=$(SAN) -fno-omit-frame-pointer -fno-sanitize-recover=all
  LDFLAGS += -fsanitize=$(SAN)
endif

ifeq ($(V),1)
  Q :=
else
  Q := @
endif

LIB_SRC  := $(wildcard src/*.c transports/*.c models/*.c)
LIB_OBJ  := $(LIB_SRC:%.c=$(BUILD)/obj/%.o)
PROG_SRC := $(wildcard examples/*.c tools/*.c)
PROGS    := $(foreach s,$(PROG_SRC),$(BUILD)/bin/$(basename $(notdir $(s))))
TEST_SRC := $(wildcard tests/test_*.c)
TESTS    := $(TEST_SRC:tests/%.c=$(BUILD)/tests/%)

.PHONY: all lib run test test-only bench deps fuzz clean
all: $(BUILD)/libddl.a $(PROGS) $(TESTS)
lib: $(BUILD)/libddl.a

$(BUILD)/obj/%.o: %.c
	@mkdir -p $(dir $@)
	@$(if $(Q),echo "  CC      $<")
	$(Q)$(CC) $(ALL_CFLAGS) -c $< -o $@

$(BUILD)/libddl.a: $(LIB_OBJ)
	@$(if $(Q),echo "  AR      $@")
	$(Q)rm -f $@ && ar rcs $@ $^

$(BUILD)/bin/%: $(BUILD)/obj/examples/%.o $(BUILD)/libddl.a
	@mkdir -p $(dir $@)
	@$(if $(Q),echo "  LD      $@")
	$(Q)$(CC) $(LDFLAGS) $< -o $@ $(BUILD)/libddl.a $(LDLIBS)

$(BUILD)/bin/%: $(BUILD)/obj/tools/%.o $(BUILD)/libddl.a
	@mkdir -p $(dir $@)
	@$(if $(Q),echo "  LD      $@")
	$(Q)$(CC) $(LDFLAGS) $< -o $@ $(BUILD)/libddl.a $(LDLIBS)

$(BUILD)/tests/%: $(BUILD)/obj/tests/%.o $(BUILD)/libddl.a
	@mkdir -p $(dir $@)
	@$(if $(Q),echo "  LD      $@")
	$(Q)$(CC) $(LDFLAGS) $< -o $@ $(BUILD)/libddl.a $(LDLIBS)

deps:
	@sh tools/install-deps.sh

run: deps
	@$(MAKE) --no-print-directory all
	$(BUILD)/bin/ddlrun -n 2 -t shm $(BUILD)/bin/lenet

test: deps
	@$(MAKE) --no-print-directory all
	@BUILD=$(BUILD) sh tests/run.sh

test-only: all
	@BUILD=$(BUILD) sh tests/run.sh

bench: deps
	@$(MAKE) --no-print-directory all
	@BUILD=$(BUILD) sh tools/bench/bench.sh

clean:
	rm -rf $(BUILD)

-include $(shell find $(BUILD)/obj -name '*.d' 2>/dev/null)
