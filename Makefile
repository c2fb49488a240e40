# bgw_jit/Makefile

MODULE_big = bgw_jit
OBJS = \
	$(WIN32RES) \
	bgw_jit.o \
	cleaner.o \
	compat.o \
	errors.o \
	estimator.o \
	flusher.o \
	pacer.o \
	scan.o \
	shmem.o \
	stats.o \
	worker.o \
	writers.o

EXTENSION = bgw_jit
# the current version's full script, and 1.0's with the update chain, so
# that databases at any earlier version can be updated and the
# regression tests can install each one
DATA = bgw_jit--1.4.sql bgw_jit--1.0.sql bgw_jit--1.0--1.1.sql \
	bgw_jit--1.1--1.2.sql bgw_jit--1.2--1.3.sql bgw_jit--1.3--1.4.sql
PGFILEDESC = "bgw_jit - just-in-time background buffer cleaning"

REGRESS = bgw_jit pacer pacer_rules
# "make installcheck" runs the pg_regress suite against the running server
# (PGHOST, PGPORT, PGUSER as usual), as for any PGXS module: that server
# must preload the library with the settings in bgw_jit.conf
# (shared_preload_libraries = 'bgw_jit', bgwriter_lru_maxpages = 0) and
# find the extension installed.  The suite makes its own database,
# contrib_regression, and runs ALTER SYSTEM RESET ALL: use a throw-away
# cluster, never one whose postgresql.auto.conf matters.
# TEMP_INSTANCE=1: pg_regress starts a server of its own instead, with
# bgw_jit.conf and, as in core's "make check", TEMP_CONFIG appended to its
# configuration (TAP tests read the same variable).  TAP_TESTS=1 runs the
# TAP tests in t/ after it (each on clusters of its own); t/run_tests.sh
# sets both.
ifdef TEMP_INSTANCE
REGRESS_OPTS = --temp-config=$(srcdir)/bgw_jit.conf --temp-instance=$(CURDIR)/tmp_check_regress
ifdef TEMP_CONFIG
REGRESS_OPTS += --temp-config=$(TEMP_CONFIG)
endif
endif
EXTRA_CLEAN = tmp_check_regress

# The library's version (shown by pg_get_loaded_modules() on 18+) is the
# extension's default version.
# (The control file is read beside this Makefile, which may be another
# directory's: pg_buildext builds out of tree, with make -f.)
BGW_JIT_SRCDIR := $(dir $(lastword $(MAKEFILE_LIST)))
BGW_JIT_VERSION := $(shell sed -n "s/^default_version *= *'\(.*\)'/\1/p" $(BGW_JIT_SRCDIR)bgw_jit.control)
PG_CPPFLAGS += -DBGW_JIT_VERSION='"$(BGW_JIT_VERSION)"'

# Test builds only: "make FAULT_INJECTION=1" adds bgw_jit.inject_error.
ifdef FAULT_INJECTION
PG_CPPFLAGS += -DBGW_JIT_FAULT_INJECTION
endif

PG_CONFIG ?= pg_config
PGXS := $(shell $(PG_CONFIG) --pgxs)
include $(PGXS)

# "make dist": the zip PGXN takes, bgw_jit-VERSION.zip (VERSION from
# META.json) in the current directory, everything in it under
# bgw_jit-VERSION/: the committed tree at HEAD (git archive; uncommitted
# changes are not in it), less .ci/, the CI entry point.
BGW_JIT_DIST = bgw_jit-$(shell perl -MJSON::PP -e 'local $$/; print decode_json(<>)->{version}' $(BGW_JIT_SRCDIR)META.json)
.PHONY: dist
dist:
	git -C '$(BGW_JIT_SRCDIR)' archive --format=zip --prefix=$(BGW_JIT_DIST)/ \
		-o '$(CURDIR)/$(BGW_JIT_DIST).zip' HEAD -- . ':(exclude).ci'
