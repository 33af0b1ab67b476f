# deduplicate_keep_first: PGXS build.
#
#   make && make install          build and install (as root)
#   make installcheck             pg_regress, isolation and TAP tests, each
#                                 against a throwaway server (run as a
#                                 non-root user; test/run does all of it)

EXTENSION   = deduplicate_keep_first
MODULE_big  = deduplicate_keep_first
# One definition of every SQL object: version 1.0's install script and the
# updates after it.  CREATE EXTENSION runs them in turn (as contrib modules
# do), so a fresh install and an updated one cannot differ.
DATA        = extension/deduplicate_keep_first--1.0.sql \
              extension/deduplicate_keep_first--1.0--1.1.sql \
              extension/deduplicate_keep_first--1.1--1.2.sql

OBJS = \
	src/ptf.o \
	src/base/kept.o \
	src/base/op_mapping.o \
	src/base/ptf_time.o \
	src/base/rowkind.o \
	src/base/subxact.o \
	src/catalog.o \
	src/citus/create.o \
	src/citus/ddl.o \
	src/citus/drain.o \
	src/citus/fence.o \
	src/citus/handoff.o \
	src/citus/init.o \
	src/citus/meta.o \
	src/citus/move.o \
	src/citus/shard.o \
	src/citus/status.o \
	src/commands/drops.o \
	src/commands/renames.o \
	src/commands/unlogged.o \
	src/engine/call.o \
	src/engine/output.o \
	src/engine/parallel.o \
	src/engine/state_load.o \
	src/engine/step.o \
	src/engine/upsert.o \
	src/frame.o \
	src/functions/apply_changelog.o \
	src/functions/common.o \
	src/functions/deduplicate_keep_first.o \
	src/functions/from_changelog.o \
	src/functions/pipelines.o \
	src/functions/state_functions.o \
	src/functions/temporal_join.o \
	src/functions/to_changelog.o \
	src/functions/row_filter.o \
	src/functions/row_number.o \
	src/functions/windows.o \
	src/decoding/json_writer.o \
	src/decoding/old_key.o \
	src/decoding/plugin.o \
	src/input/cdc_rows.o \
	src/input/jsonb_image.o \
	src/input/change_buffer.o \
	src/input/change_stream.o \
	src/input/sql_input.o \
	src/input/stream_slot.o \
	src/operators/aggs.o \
	src/operators/aggs_stored.o \
	src/operators/dedup.o \
	src/operators/dedup_partial.o \
	src/operators/normalize.o \
	src/operators/operator.o \
	src/operators/temporal_join.o \
	src/operators/window_agg.o \
	src/operators/window_math.o \
	src/operators/window_partial.o \
	src/operators/window_session.o \
	src/operators/window_tvf.o \
	src/operators/window_rank.o \
	src/planner/first_rows_rule.o \
	src/planner/planner.o \
	src/planner/tvf_call.o \
	src/planner/tvf_inline.o \
	src/planner/window_agg_rule.o \
	src/planner/window_rank_rule.o \
	src/planner/window_scan.o \
	src/sink/append.o \
	src/sink/apply.o \
	src/sink/direct_insert.o \
	src/state/dense_keys.o \
	src/state/images_table.o \
	src/state/key.o \
	src/state/keyed_state.o \
	src/state/keyed_state_durable.o \
	src/state/registry.o \
	src/state/row_images.o \
	src/state/state_io.o \
	src/state/state_table.o \
	src/state/timers.o \
	src/worker/assign.o \
	src/worker/launcher.o \
	src/worker/pipeline.o \
	src/worker/shmem.o \
	src/worker/step.o \
	src/worker/wake.o \
	src/worker/xact_writes.o

PG_CPPFLAGS = -I$(srcdir)/src
PG_CFLAGS   = -Wall -Wextra -Wno-unused-parameter -Wno-missing-field-initializers

# make PTF_WERROR=1: warnings are errors (test/run and demo/run build so;
# packagers building with other compilers do not)
ifeq ($(PTF_WERROR),1)
PG_CFLAGS += -Werror
endif

# make PTF_ASSERTS=1: our Assert()s checked, even against a server built
# without them (test/run runs the suites against such a build too)
ifeq ($(PTF_ASSERTS),1)
PG_CPPFLAGS += -DUSE_ASSERT_CHECKING
endif

# pg_regress suites (sql/, expected/), run on a temporary server with our configuration
REGRESS      = $(patsubst sql/%.sql,%,$(sort $(wildcard sql/*.sql)))
REGRESS_OPTS = --temp-instance=./tmp_check --temp-config=test/ptf.conf \
               --load-extension=$(EXTENSION)

# isolation specs (test/specs, test/expected)
ISOLATION      = $(patsubst test/specs/%.spec,%,$(sort $(wildcard test/specs/*.spec)))
ISOLATION_OPTS = --inputdir=test --outputdir=test/output_iso \
                 --temp-instance=./tmp_check_iso --temp-config=test/ptf.conf \
                 --load-extension=$(EXTENSION)

# TAP tests (test/t/*.pl)
TAP_TESTS   = 1
PROVE_TESTS = test/t/*.pl

PG_CONFIG = pg_config
PGXS := $(shell $(PG_CONFIG) --pgxs)
include $(PGXS)

# PGXS tracks no header dependencies (autodepend is off in packaged builds):
# every object depends on every header of ours, so no stale struct layout.
$(OBJS): $(wildcard $(srcdir)/src/*.h $(srcdir)/src/*/*.h)

# Objects depend on the switches they were compiled with: a build with
# another PTF_ASSERTS recompiles everything (a benchmark's build once kept an
# assert build's objects, up to date by their sources, and measured them).
PTF_BUILD_FLAGS := asserts=$(PTF_ASSERTS)
.ptf-build-flags: ptf-build-flags-check
	@:
ptf-build-flags-check:
	@echo '$(PTF_BUILD_FLAGS)' | cmp -s - .ptf-build-flags || echo '$(PTF_BUILD_FLAGS)' > .ptf-build-flags
$(OBJS): .ptf-build-flags
.PHONY: ptf-build-flags-check
EXTRA_CLEAN += .ptf-build-flags

# A VPATH build (pg_buildext builds each version in build-<version>) needs
# the object directories that the source tree has.
ifdef VPATH
$(OBJS): | object-dirs
object-dirs:
	@mkdir -p $(sort $(dir $(OBJS)))
.PHONY: object-dirs
endif
