# ddl - plain Makefile, no configure step.
#   make                 build/libddl.a, build/libddl.so and the programs in build/bin/
#   make run             install what is missing, build, train LeNet on 2 local ranks
#   make test            install what is missing, build, run every test
#   make bench           benchmarks (long runs, peer comparisons)
#   make install         ddl.h, libddl.a, libddl.so, ddl.pc, the CMake package and the programs
#                        under $(DESTDIR)$(PREFIX) (PREFIX=/usr/local); SHARED=0: no libddl.so, so
#                        -lddl links libddl.a; make uninstall removes them; make install-lib: the
#                        library alone (no programs, no PostgreSQL extension)
# Switches: WITH_BLAS=openblas|none  WITH_ZMQ=0|1  WITH_MPI=0|1  WITH_LZ4=0|1  WITH_SODIUM=0|1  WITH_PNG=0|1  WITH_JPEG=0|1  WITH_JANSSON=0|1  WITH_PQ=0|1 (--predict --db)
#           WITH_SERVE=0|1 (ddl-serve: libmicrohttpd, jansson and yajl)
#           SAN=address|undefined|thread  V=1  BUILD=dir (default build)  CPPFLAGS=-D... (e.g. -DDDL_NO_BF16_CONV:
#           every bfloat16 convolution by im2col + the product, the AMX path's way, on any CPU)
#   make pg              the PostgreSQL extension (pg/), where pg_config and PGXS are (PG_CONFIG=path);
#                        make builds it and make install installs it there; make pg-install alone

BUILD     ?= build
# make install, install-lib and uninstall take the switches $(BUILD) was built with (kept in
# $(BUILD)/config.mk), so they install that build as it is; switches given to them still win.
ifneq ($(filter install install-lib uninstall,$(MAKECMDGOALS)),)
  -include $(BUILD)/config.mk
endif
WITH_BLAS ?= openblas
WITH_ZMQ  ?= $(if $(wildcard /usr/include/zmq.h),1,0)
WITH_MPI  ?= $(if $(shell command -v mpicc 2>/dev/null),1,0)
WITH_LZ4  ?= $(if $(wildcard /usr/include/lz4.h),1,0)
WITH_ZLIB ?= $(if $(wildcard /usr/include/zlib.h),1,0)
WITH_SODIUM ?= $(if $(wildcard /usr/include/sodium.h),1,0)
WITH_PNG  ?= $(if $(wildcard /usr/include/png.h),1,0)
WITH_JPEG ?= $(if $(wildcard /usr/include/jpeglib.h),1,0)
WITH_SERVE ?= $(if $(and $(wildcard /usr/include/microhttpd.h),$(wildcard /usr/include/jansson.h),$(wildcard /usr/include/yajl/yajl_parse.h)),1,0)
WITH_JANSSON ?= $(if $(wildcard /usr/include/jansson.h),1,0)
# the PostgreSQL extension (make pg): built and installed where PostgreSQL's server headers and
# PGXS are. PGXS's pgxs.mk alone is not enough: postgresql-client-15 (every machine with psql or
# the server) ships it, the headers come with postgresql-server-dev-NN. Where PGXS is and the
# headers are not, make says so in one line (PG_SKIP) and builds everything else.
PG_CONFIG ?= pg_config
PG_PGXS   := $(wildcard $(shell $(PG_CONFIG) --pgxs 2>/dev/null))
PG_SERVER_H := $(if $(PG_PGXS),$(wildcard $(shell $(PG_CONFIG) --includedir-server 2>/dev/null)/postgres.h))
HAVE_PG   := $(if $(PG_SERVER_H),1,0)
PG_DEV_PKG = postgresql-server-dev-$(firstword $(subst ., ,$(word 2,$(shell $(PG_CONFIG) --version 2>/dev/null))))
PG_SKIP   = ddl: the PostgreSQL extension (pg/) is skipped: no server headers (postgres.h) in \
            $(shell $(PG_CONFIG) --includedir-server 2>/dev/null); $(PG_DEV_PKG) brings them
# libpq (libpq-dev): lenet, unet and ddl-train --predict --db score a PostgreSQL table. Optional:
# without it they build with the database code left out (common/example_db.h).
WITH_PQ   ?= $(if $(wildcard /usr/include/postgresql/libpq-fe.h),1,0)

CC      ?= cc
PKG_CONFIG ?= pkg-config
CSTD    := -std=c11
WARN    := -Wall -Wextra -Wpedantic -Wshadow -Wstrict-prototypes -Wmissing-prototypes
# x86-64-v2 only where the compiler targets x86-64; elsewhere the compiler's default.
ifneq ($(filter x86_64-%,$(shell $(CC) -dumpmachine)),)
  OPT   ?= -O3 -march=x86-64-v2 -fno-math-errno
else
  OPT   ?= -O3 -fno-math-errno
endif
CFLAGS  ?= $(OPT) -g
ALL_CFLAGS = $(CSTD) $(WARN) $(CFLAGS) $(CPPFLAGS) -D_GNU_SOURCE -I. -Isrc -MMD -MP
LDLIBS  := -lm -lpthread -lrt

ifeq ($(WITH_BLAS),openblas)
  BLAS_CFLAGS := $(shell $(PKG_CONFIG) --cflags openblas 2>/dev/null)
  ALL_CFLAGS += -DDDL_WITH_OPENBLAS $(BLAS_CFLAGS)
  LDLIBS += -lopenblas
endif
ifeq ($(WITH_ZLIB),1)
  ALL_CFLAGS += -DDDL_WITH_ZLIB
  LDLIBS += -lz
endif
ifeq ($(WITH_PNG),1)
  ALL_CFLAGS += -DDDL_WITH_PNG
  LDLIBS += -lpng
endif
ifeq ($(WITH_JPEG),1)
  ALL_CFLAGS += -DDDL_WITH_JPEG
  LDLIBS += -ljpeg
endif
# jansson: ddl-sweep's --space file (and ddl-serve, see WITH_SERVE); the library does not link it.
ifeq ($(WITH_JANSSON),1)
  ALL_CFLAGS += -DDDL_WITH_JANSSON
  $(BUILD)/bin/ddl-sweep: TOOL_LIBS := -ljansson
endif
ifeq ($(WITH_LZ4),1)
  ALL_CFLAGS += -DDDL_WITH_LZ4
  LDLIBS += -llz4
endif
ifeq ($(WITH_SODIUM),1)
  ALL_CFLAGS += -DDDL_WITH_SODIUM
  LDLIBS += -lsodium
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

LIB_SRC  := $(wildcard src/*/*.c transports/*.c models/*.c)
LIB_OBJ  := $(LIB_SRC:%.c=$(BUILD)/pic/%.o)
PROG_SRC := $(wildcard examples/*.c tools/*.c)
ifneq ($(WITH_PNG),1)
  PROG_SRC := $(filter-out tools/ddl-plot.c,$(PROG_SRC)) # it draws with libpng
endif
PROGS    := $(foreach s,$(PROG_SRC),$(BUILD)/bin/$(basename $(notdir $(s))))
# Programs of several files: each folder tools/NAME/ with a main.c is one program (its .c files
# and one private header), built into bin/ddl-NAME, or bin/NAME when NAME starts with ddl
# (tools/serve/ is ddl-serve, tools/sweep/ ddl-sweep, tools/ddlrun/ ddlrun). TOOL_LIBS: a
# program's own libraries, linked before the library's.
TOOLS    := $(patsubst tools/%/main.c,%,$(wildcard tools/*/main.c))
tool_bin  = $(BUILD)/bin/$(if $(filter ddl%,$(1)),$(1),ddl-$(1))
# ddl-serve: libmicrohttpd, jansson and yajl; its page compiled in (web.c includes web_index.inc)
SERVE_LIBS := $(shell $(PKG_CONFIG) --libs libmicrohttpd jansson yajl 2>/dev/null || echo -lmicrohttpd -ljansson -lyajl)
$(BUILD)/bin/ddl-serve: TOOL_LIBS := $(SERVE_LIBS)
PROGS    += $(foreach t,$(filter-out $(if $(filter 1,$(WITH_SERVE)),,serve),$(TOOLS)),$(call tool_bin,$(t)))
TEST_SRC := $(wildcard tests/test_*.c)
TESTS    := $(TEST_SRC:tests/%.c=$(BUILD)/tests/%)

# The version comes from ddl.h; the soname changes with the ABI: with the major version, and while
# that is 0 (when a minor version may change the ABI) with the minor too: libddl.so.0.2.
ddl_version = $(shell sed -n 's/^.define DDL_VERSION_$(1)  *\([0-9][0-9]*\).*/\1/p' ddl.h)
VERSION_MAJOR := $(call ddl_version,MAJOR)
VERSION     := $(VERSION_MAJOR).$(call ddl_version,MINOR).$(call ddl_version,PATCH)
ABI_VERSION := $(if $(filter 0,$(VERSION_MAJOR)),0.$(call ddl_version,MINOR),$(VERSION_MAJOR))
SONAME      := libddl.so.$(ABI_VERSION)
SHLIB       := $(BUILD)/libddl.so.$(VERSION)
SHLIB_LINKS := $(BUILD)/$(SONAME) $(BUILD)/libddl.so
DIST_FILES  := $(BUILD)/ddl.pc $(BUILD)/cmake/ddlConfig.cmake $(BUILD)/cmake/ddlConfigVersion.cmake

PREFIX     ?= /usr/local
SHARED     ?= 1
BINDIR     ?= $(PREFIX)/bin
LIBDIR     ?= $(PREFIX)/lib
INCLUDEDIR ?= $(PREFIX)/include

.PHONY: all lib run test test-only bench deps deps-run fuzz fuzz-build clang-check clean install install-lib uninstall FORCE
all: lib $(PROGS) $(TESTS) $(if $(filter 1,$(HAVE_PG)),pg,$(if $(PG_PGXS),pg-skipped))
lib: $(BUILD)/libddl.a $(if $(filter 0,$(SHARED)),,$(SHLIB_LINKS)) $(DIST_FILES)

$(BUILD)/obj/%.o: %.c $(BUILD)/flags
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

# one rule per folder of TOOLS: bin/X from the objects of tools/NAME/*.c
define tool_rule
$(call tool_bin,$(1)): $(patsubst %.c,$(BUILD)/obj/%.o,$(wildcard tools/$(1)/*.c)) $(BUILD)/libddl.a
	@mkdir -p $$(dir $$@)
	@$$(if $$(Q),echo "  LD      $$@")
	$$(Q)$$(CC) $$(LDFLAGS) $$(filter %.o,$$^) -o $$@ $$(BUILD)/libddl.a $$(TOOL_LIBS) $$(LDLIBS)
endef
$(foreach t,$(TOOLS),$(eval $(call tool_rule,$(t))))

$(BUILD)/gen/web_index.inc: tools/serve/index.html
	@mkdir -p $(dir $@)
	$(Q)od -An -v -tx1 $< | sed 's/\([0-9a-f][0-9a-f]\)/0x\1,/g' > $@.tmp && mv $@.tmp $@
$(BUILD)/obj/tools/serve/web.o: $(BUILD)/gen/web_index.inc
$(BUILD)/obj/tools/serve/%.o: ALL_CFLAGS += -I$(BUILD)/gen

$(BUILD)/tests/%: $(BUILD)/obj/tests/%.o $(BUILD)/libddl.a
	@mkdir -p $(dir $@)
	@$(if $(Q),echo "  LD      $@")
	$(Q)$(CC) $(LDFLAGS) $< -o $@ $(BUILD)/libddl.a $(LDLIBS)

# $(BUILD)/flags holds the compile command: when a switch changes it, every object is rebuilt, so
# the library, ddl.pc and the CMake package always describe the same build. $(BUILD)/config.mk
# keeps the switches for make install. The programs' objects are kept (.SECONDARY), else a
# rewritten flags file would have them compiled again at every make.
.SECONDARY:
update = if cmp -s $(1).tmp $(1); then rm $(1).tmp; else mv $(1).tmp $(1); fi
$(BUILD)/flags: FORCE
	@mkdir -p $(BUILD)
	@echo '$(CC) $(ALL_CFLAGS)' > $@.tmp && $(call update,$@)
	@printf '%s\n' 'ifeq ($$(origin CC),default)' 'CC := $(CC)' endif 'CFLAGS ?= $(CFLAGS)' 'CPPFLAGS ?= $(CPPFLAGS)' 'SAN ?= $(SAN)' \
	    $(foreach v,BLAS ZMQ MPI LZ4 ZLIB SODIUM PNG JPEG JANSSON,'WITH_$(v) ?= $(WITH_$(v))') > $(BUILD)/config.mk.tmp && \
	    $(call update,$(BUILD)/config.mk)

# --predict --db: DDL_EXAMPLE_PQ and libpq for the programs that have it alone (private: the
# library's objects and $(BUILD)/flags, their prerequisites, do not inherit them)
ifeq ($(WITH_PQ),1)
  PQ_CFLAGS := $(shell $(PKG_CONFIG) --cflags libpq 2>/dev/null || echo -I/usr/include/postgresql)
  PQ_LIBS   := $(shell $(PKG_CONFIG) --libs libpq 2>/dev/null || echo -lpq)
  $(BUILD)/obj/examples/lenet.o $(BUILD)/obj/examples/unet.o $(BUILD)/obj/tools/train/predict.o: private ALL_CFLAGS += -DDDL_EXAMPLE_PQ $(PQ_CFLAGS)
  $(BUILD)/bin/lenet $(BUILD)/bin/unet: private LDLIBS += $(PQ_LIBS)
  $(BUILD)/bin/ddl-train: private TOOL_LIBS := $(PQ_LIBS)
endif

# ---- shared library, ddl.pc, CMake package, install ----
# The library's objects ($(BUILD)/pic/) are position-independent, so that one compilation makes
# both libddl.a and libddl.so (compiling it twice was a quarter of make test's build).
# -fno-semantic-interposition: no program replaces one of the library's functions by its own, so
# GCC may inline and call them directly as in an executable (Debian's default -fPIE): libddl.a's
# code is what it was, and its weights_crc with it.
$(BUILD)/pic/%.o: %.c $(BUILD)/flags
	@mkdir -p $(dir $@)
	@$(if $(Q),echo "  CC      $<")
	$(Q)$(CC) $(ALL_CFLAGS) -fPIC -fno-semantic-interposition -c $< -o $@

$(SHLIB): $(LIB_OBJ)
	@$(if $(Q),echo "  LD      $@")
	$(Q)$(CC) -shared -Wl,-soname,$(SONAME) -Wl,--no-undefined $(LDFLAGS) -o $@ $^ $(LDLIBS)

$(BUILD)/$(SONAME): $(SHLIB)
	$(Q)ln -sf $(notdir $<) $@
$(BUILD)/libddl.so: $(BUILD)/$(SONAME)
	$(Q)ln -sf $(notdir $<) $@

# ddl.pc and ddlConfig.cmake from the link flags of this build (MPI's among them when it is on).
DIST_SED = sed -e 's|@PREFIX@|$(PREFIX)|' -e 's|@LIBDIR@|$(patsubst $(PREFIX)/%,$${prefix}/%,$(LIBDIR))|' \
    -e 's|@INCLUDEDIR@|$(patsubst $(PREFIX)/%,$${prefix}/%,$(INCLUDEDIR))|' \
    -e 's|@VERSION@|$(VERSION)|g' -e 's|@ABI_VERSION@|$(ABI_VERSION)|' -e 's|@SONAME@|$(SONAME)|' \
    -e 's|@LIBS_PRIVATE@|$(strip $(LDLIBS))|' \
    -e 's|@REL_INCLUDEDIR@|$(shell realpath -m --relative-to=$(LIBDIR)/cmake/ddl $(INCLUDEDIR))|' \
    -e 's|@CMAKE_LINK_DIRS@|$(subst $(space),;,$(patsubst -L%,%,$(filter -L%,$(LDLIBS))))|' \
    -e 's|@CMAKE_LINK_LIBS@|$(subst $(space),;,$(filter -l%,$(LDLIBS)))|' \
    -e 's|@CMAKE_LINK_OPTS@|$(subst $(space),;,$(filter-out -L% -l%,$(LDLIBS)))|'
space := $(subst ,, )

$(DIST_FILES): FORCE
	@mkdir -p $(dir $@)
	@$(DIST_SED) dist/$(notdir $@).in > $@.tmp && $(call update,$@)

# install-lib: the library alone (ddl.h, libddl.a and libddl.so, ddl.pc, the CMake package), for a
# program that vendors it; install: that, the programs and, where PostgreSQL is, its extension.
install-lib: lib
	install -d $(DESTDIR)$(INCLUDEDIR) $(DESTDIR)$(LIBDIR)/pkgconfig $(DESTDIR)$(LIBDIR)/cmake/ddl
	install -m 644 ddl.h $(DESTDIR)$(INCLUDEDIR)/
	install -m 644 $(BUILD)/libddl.a $(DESTDIR)$(LIBDIR)/
ifneq ($(SHARED),0)
	install -m 755 $(SHLIB) $(DESTDIR)$(LIBDIR)/
	ln -sf $(notdir $(SHLIB)) $(DESTDIR)$(LIBDIR)/$(SONAME)
	ln -sf $(SONAME) $(DESTDIR)$(LIBDIR)/libddl.so
endif
	install -m 644 $(BUILD)/ddl.pc $(DESTDIR)$(LIBDIR)/pkgconfig/
	install -m 644 $(BUILD)/cmake/ddlConfig.cmake $(BUILD)/cmake/ddlConfigVersion.cmake $(DESTDIR)$(LIBDIR)/cmake/ddl/

install: install-lib $(PROGS)
	install -d $(DESTDIR)$(BINDIR)
	install -m 755 $(PROGS) $(DESTDIR)$(BINDIR)/
	@if [ -z "$(DESTDIR)" ] && [ "$$(id -u)" = 0 ]; then PATH=$$PATH:/sbin:/usr/sbin ldconfig 2>/dev/null || true; fi
ifeq ($(HAVE_PG),1)
	@if [ -n "$(DESTDIR)" ] || [ -w "$$($(PG_CONFIG) --pkglibdir)" ]; then $(MAKE) --no-print-directory pg-install; \
	else echo "ddl: the PostgreSQL extension is not installed: $$($(PG_CONFIG) --pkglibdir) is not writable (as root: make pg-install)"; fi
endif

uninstall:
	rm -f $(DESTDIR)$(INCLUDEDIR)/ddl.h $(DESTDIR)$(LIBDIR)/libddl.a $(DESTDIR)$(LIBDIR)/libddl.so \
	    $(DESTDIR)$(LIBDIR)/$(SONAME) $(DESTDIR)$(LIBDIR)/$(notdir $(SHLIB)) $(DESTDIR)$(LIBDIR)/pkgconfig/ddl.pc \
	    $(DESTDIR)$(LIBDIR)/cmake/ddl/ddlConfig.cmake $(DESTDIR)$(LIBDIR)/cmake/ddl/ddlConfigVersion.cmake \
	    $(addprefix $(DESTDIR)$(BINDIR)/,$(notdir $(PROGS)))
	rmdir $(DESTDIR)$(LIBDIR)/cmake/ddl 2>/dev/null || true
ifeq ($(HAVE_PG),1)
	@if [ -n "$(DESTDIR)" ] || [ -w "$$($(PG_CONFIG) --pkglibdir)" ]; then $(MAKE) --no-print-directory pg-uninstall; fi
endif

# ---- the PostgreSQL extension (pg/), where PostgreSQL's pg_config is ----
# pg's ddl.so holds the library (linked statically, its symbols kept inside): a PIC archive of a
# build of its own, $(BUILD)/pg/, with the switches a server process wants: no OpenBLAS (its
# thread pool would start inside every backend that loads the extension; the built-in gemm
# gives the same classes), no MPI, no ZeroMQ, no sanitizer. PGXS compiles and links in
# $(BUILD)/pg/ext, so nothing is written into pg/.
# Only the files that read those switches differ from this build's, so unless this build is
# sanitized, $(BUILD)/pg compiles them alone and takes the others' objects from $(BUILD)/pic
# (PG_SHARE): the library was compiled a second time for the extension, 20 s of make test's build.
PG_SWITCHES := DDL_WITH_(OPENBLAS|ZMQ|MPI)
PG_HEADERS := $(notdir $(shell grep -lE '$(PG_SWITCHES)' $(wildcard src/*/*.h transports/*.h)))
PG_SHARES  := $(if $(SAN),,$(if $(shell grep -lE '$(PG_SWITCHES)' ddl.h),,1))
ifneq ($(PG_SHARE),)
  # the sources that read a switch, or include a header that does
  PG_OWN   := $(shell grep -lE '$(PG_SWITCHES)$(foreach h,$(PG_HEADERS),|"$(h)")' $(LIB_SRC))
  LIB_OBJ  := $(patsubst %.c,$(PG_SHARE)/pic/%.o,$(filter-out $(PG_OWN),$(LIB_SRC))) \
              $(patsubst %.c,$(BUILD)/pic/%.o,$(PG_OWN))
endif
PG_EXT     = $(MAKE) --no-print-directory -C $(BUILD)/pg/ext -f $(CURDIR)/pg/Makefile PG_CONFIG=$(PG_CONFIG) \
             DDL_BUILD=$(abspath $(BUILD)/pg)
.PHONY: pg pg-install pg-uninstall pg-skipped
pg-skipped:
	@echo "$(PG_SKIP)"
# without PGXS or the server headers it fails at once, before it would build the library it shares
pg: $(if $(filter 1,$(HAVE_PG)),$(if $(PG_SHARES),$(BUILD)/libddl.a))
ifneq ($(HAVE_PG),1)
	@echo "$(if $(PG_PGXS),$(PG_SKIP),ddl: make pg needs PostgreSQL's pg_config and PGXS ($(PG_CONFIG) not found or without --pgxs))" >&2; exit 1
endif
	+@$(MAKE) --no-print-directory BUILD=$(BUILD)/pg WITH_BLAS=none WITH_MPI=0 WITH_ZMQ=0 SAN= \
	    $(if $(PG_SHARES),PG_SHARE=$(BUILD)) $(BUILD)/pg/libddl_pic.a
	@mkdir -p $(BUILD)/pg/ext
	+@$(PG_EXT) $(if $(Q),-s)
pg-install: pg
	+@$(PG_EXT) install
pg-uninstall:
	@mkdir -p $(BUILD)/pg/ext
	+@$(PG_EXT) uninstall

# a PIC archive, for a shared object that holds the library (pg's ddl.so); its link flags beside it
$(BUILD)/libddl_pic.a: $(LIB_OBJ)
	@$(if $(Q),echo "  AR      $@")
	$(Q)rm -f $@ && ar rcs $@ $^
	$(Q)echo '$(strip $(LDLIBS))' > $(BUILD)/libddl_pic.libs

deps:
	@sh tools/install-deps.sh

# what make run needs: building and training, no test tools and no npm
deps-run:
	@DDL_DEPS=run sh tools/install-deps.sh

# the build inside run, test and bench takes every core, unless make was given -j itself (a clean
# build: 60 s on one of these 2 cores, 35 s on both)
SUB_MAKE  = $(MAKE) --no-print-directory $(if $(filter -j%,$(MAKEFLAGS)),,-j$(shell nproc 2>/dev/null || echo 1))
BUILD_ALL = $(SUB_MAKE) all

# make run builds what it runs (libddl.a, lenet and ddlrun): no tests, no shared library
run: deps-run
	+@$(SUB_MAKE) $(BUILD)/bin/ddlrun $(BUILD)/bin/lenet
	$(BUILD)/bin/ddlrun -n 2 -t shm $(BUILD)/bin/lenet

# make test T="test_a test_b.sh": those tests alone (tests/run.sh NAME...)
test: deps
	@$(BUILD_ALL)
	@BUILD=$(BUILD) SAN=$(SAN) sh tests/run.sh $(T)

test-only: all
	@BUILD=$(BUILD) SAN=$(SAN) sh tests/run.sh

bench: deps
	@$(BUILD_ALL)
	@BUILD=$(BUILD) sh tools/bench/bench.sh

# make fuzz: the libFuzzer targets tests/fuzz/fuzz_*.c, built with clang (ASan + UBSan) in
# $(BUILD)/fuzz/, each run for FUZZ_SECONDS (default 60) on its corpus in $(BUILD)/fuzz/corpus/
# (what it finds is kept there), starting from the committed seeds in tests/fuzz/corpus/NAME/
# and with the dictionary tests/fuzz/NAME.dict where they exist; FUZZ_ONLY=fuzz_onnx runs one.
FUZZ_CC      ?= clang
FUZZ_SECONDS ?= 60
FUZZ_ONLY    ?=
FUZZ_CFLAGS  := $(CSTD) $(WARN) -g -O1 -fno-omit-frame-pointer -fsanitize=address,undefined -fno-sanitize-recover=undefined \
                $(filter -D% -I%,$(ALL_CFLAGS)) -Itransports -Itests/fuzz
FUZZ_SRC     := $(filter-out $(if $(filter 1,$(WITH_SERVE)),,tests/fuzz/fuzz_serve.c),$(wildcard tests/fuzz/fuzz_*.c))
FUZZ_BINS    := $(FUZZ_SRC:tests/fuzz/%.c=$(BUILD)/fuzz/%)
FUZZ_OBJ     := $(LIB_SRC:%.c=$(BUILD)/fuzz/obj/%.o)

$(BUILD)/fuzz/obj/%.o: %.c
	@mkdir -p $(dir $@)
	@$(if $(Q),echo "  FUZZCC  $<")
	$(Q)$(FUZZ_CC) $(FUZZ_CFLAGS) -fsanitize=fuzzer-no-link -c $< -o $@

$(BUILD)/fuzz/libddl.a: $(FUZZ_OBJ)
	$(Q)rm -f $@ && ar rcs $@ $^

$(BUILD)/fuzz/fuzz_%: tests/fuzz/fuzz_%.c tests/fuzz/fuzz_common.h $(BUILD)/fuzz/libddl.a
	@$(if $(Q),echo "  FUZZLD  $@")
	$(Q)$(FUZZ_CC) $(FUZZ_CFLAGS) -fsanitize=fuzzer $< -o $@ $(BUILD)/fuzz/libddl.a $(LDLIBS)

# fuzz_serve: ddl-serve's request parsing; it compiles tools/serve/*.c in, and links their libraries.
# The sources other targets compile in are their prerequisites too.
$(BUILD)/fuzz/fuzz_serve: LDLIBS += $(SERVE_LIBS)
$(BUILD)/fuzz/fuzz_serve: $(wildcard tools/serve/*.c tools/serve/*.h) tools/eventdirs.h tools/tfevents.h tools/shortest.h
$(BUILD)/fuzz/fuzz_events: tools/tfevents.h
$(BUILD)/fuzz/fuzz_heartbeat: src/comm/heartbeat.c src/comm/elastic.c src/comm/impl.h
$(BUILD)/fuzz/fuzz_wire: transports/tcp.c

# make clang-check: the library's sources and the fuzz targets through clang's front end with the
# warnings and definitions of make fuzz, warnings as errors, compiling nothing (tests/test_clang.sh:
# make fuzz broke twice unseen, on a gcc-only builtin and on a serve source the target left out)
clang-check:
	$(Q)$(FUZZ_CC) $(CSTD) $(WARN) -Werror $(filter -D% -I%,$(ALL_CFLAGS)) -Itransports -Itests/fuzz -fsyntax-only \
	    $(LIB_SRC) $(FUZZ_SRC)

fuzz-build:
	@command -v $(FUZZ_CC) >/dev/null 2>&1 || DDL_FUZZ_DEPS=1 sh tools/install-deps.sh
	@$(MAKE) --no-print-directory $(FUZZ_BINS)

fuzz: fuzz-build
	@for f in $(if $(FUZZ_ONLY),$(FUZZ_ONLY:%=$(BUILD)/fuzz/%),$(FUZZ_BINS)); do \
	    n=$$(basename $$f); c=$(BUILD)/fuzz/corpus/$$n; mkdir -p $$c; \
	    s=tests/fuzz/corpus/$$n; [ -d $$s ] || s=; d=tests/fuzz/$$n.dict; [ -f $$d ] && d=-dict=$$d || d=; \
	    FUZZ_SEED_DIR=$$c $$f -runs=0 $$c >/dev/null 2>&1; \
	    echo "  FUZZ    $$n for $(FUZZ_SECONDS) s$${s:+, seeds $$s}$${d:+, $$d}"; \
	    $$f -max_total_time=$(FUZZ_SECONDS) -max_len=65536 -timeout=10 -rss_limit_mb=2048 $$d \
	        -artifact_prefix=$(BUILD)/fuzz/$$n- $$c $$s 2>$(BUILD)/fuzz/$$n.log || { tail -n 40 $(BUILD)/fuzz/$$n.log; exit 1; }; \
	    grep -E '^#[0-9]+.*DONE' $(BUILD)/fuzz/$$n.log | tail -n 1; grep -E '^Done [0-9]+ runs' $(BUILD)/fuzz/$$n.log; \
	done

clean:
	rm -rf $(BUILD)

-include $(shell find $(BUILD)/obj $(BUILD)/pic -name '*.d' 2>/dev/null)
