# bgw_jit/Makefile

MODULE_big = bgw_jit
OBJS = \
	$(WIN32RES) \
	bgw_jit.o \
	cleaner.o \
	compat.o \
	estimator.o \
	pacer.o \
	persist.o \
	stats.o \
	worker.o

EXTENSION = bgw_jit
DATA = bgw_jit--1.0.sql bgw_jit--1.0--1.1.sql bgw_jit--1.1.sql \
	bgw_jit--1.1--1.2.sql bgw_jit--1.2.sql
PGFILEDESC = "bgw_jit - just-in-time background buffer cleaning"

REGRESS = bgw_jit pacer
REGRESS_OPTS = --temp-config=$(srcdir)/bgw_jit.conf --temp-instance=$(CURDIR)/tmp_check_regress
# As in core's "make check": settings appended to the temp instance's
# configuration (TAP tests read the same variable).
ifdef TEMP_CONFIG
REGRESS_OPTS += --temp-config=$(TEMP_CONFIG)
endif
TAP_TESTS = 1

# The library's version (shown by pg_get_loaded_modules() on 18+) is the
# extension's default version.
BGW_JIT_VERSION := $(shell sed -n "s/^default_version *= *'\(.*\)'/\1/p" bgw_jit.control)
PG_CPPFLAGS += -DBGW_JIT_VERSION='"$(BGW_JIT_VERSION)"'

# Test builds only: "make FAULT_INJECTION=1" adds bgw_jit.inject_error.
ifdef FAULT_INJECTION
PG_CPPFLAGS += -DBGW_JIT_FAULT_INJECTION
endif

PG_CONFIG ?= pg_config
PGXS := $(shell $(PG_CONFIG) --pgxs)
include $(PGXS)
