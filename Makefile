# bgw_jit/Makefile

MODULE_big = bgw_jit
OBJS = \
	$(WIN32RES) \
	bgw_jit.o \
	cleaner.o \
	estimator.o \
	pacer.o \
	persist.o \
	stats.o \
	worker.o

EXTENSION = bgw_jit
DATA = bgw_jit--1.0.sql
PGFILEDESC = "bgw_jit - just-in-time background buffer cleaning"

REGRESS = bgw_jit pacer
REGRESS_OPTS = --temp-config=$(srcdir)/bgw_jit.conf --temp-instance=$(CURDIR)/tmp_check_regress
TAP_TESTS = 1

# Test builds only: "make FAULT_INJECTION=1" adds bgw_jit.inject_error.
ifdef FAULT_INJECTION
PG_CPPFLAGS += -DBGW_JIT_FAULT_INJECTION
endif

PG_CONFIG ?= /usr/lib/postgresql/15/bin/pg_config
PGXS := $(shell $(PG_CONFIG) --pgxs)
include $(PGXS)
