# shellcheck shell=bash
# scripts/lib.sh: shared helpers for test/run and demo/run (source it, don't run it).
#
#   ptf_ensure_packages      install PostgreSQL 15 (newest), its server headers and
#                            the build/test tools with apt, unless all are present
#   ptf_build_install [VAR=..] make -j2 && make install in the repo root (as root),
#                            with the make variables given (PTF_ASSERTS=1: a
#                            build with assertions; objects of another kind
#                            of build are cleaned first)
#   ptf_pg_start DIR         throwaway cluster in DIR (owned by postgres), with
#                            test/ptf.conf (plus $PTF_PG_CONF_EXTRA), a free port
#                            and its socket in DIR; exports PGHOST, PGPORT,
#                            PGUSER, PGDATABASE
#   ptf_pg_stop DIR          stop it (-m fast)
#   ptf_psql ARGS...         psql as the postgres OS user against that server
#   ptf_as_postgres CMD...   any command as the postgres OS user
#
# Debian keeps initdb, pg_ctl and postgres in $(pg_config --bindir), which is not
# on PATH; these helpers always call them by full path.

PTF_ROOT="${PTF_ROOT:-$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)}"
PTF_PG_MAJOR=15
# oldest server that knows the GUC output_plugin_libraries, which test/ptf.conf sets
PTF_PG_MIN_VERSION=15.20

ptf_log() { printf '==> %s\n' "$*" >&2; }
ptf_die() { printf 'ERROR: %s\n' "$*" >&2; exit 1; }

# One locale everywhere (C.UTF-8 ships with libc-bin): initdb, pg_regress and the
# TAP framework take LANG from the environment; pg_regress and TAP clear LC_ALL.
ptf_sane_locale() {
    unset LC_ALL LANGUAGE LC_CTYPE LC_COLLATE LC_MESSAGES LC_MONETARY LC_NUMERIC LC_TIME
    export LANG=C.UTF-8
}
ptf_sane_locale

# ---------------------------------------------------------------------------
# Packages
# ---------------------------------------------------------------------------

# Packages the build and the tests need.  postgresql-server-dev-15 brings
# pg_config, PGXS, clang/llvm (for the .bc files) and libpq-dev;
# postgresql-client-15 (a dependency of postgresql-15) brings psql, pg_regress's
# pg_isolation_regress and the PostgreSQL::Test perl modules; perl brings prove.
PTF_PACKAGES=(
    postgresql-15 postgresql-server-dev-15 postgresql-client-15
    libipc-run-perl perl make gcc libc6-dev
)

ptf_pkg_installed() {
    [ "$(dpkg-query -W -f='${db:Status-Status}' "$1" 2>/dev/null || true)" = installed ]
}

ptf_pkg_version() {   # installed version, or empty
    if ptf_pkg_installed "$1"; then dpkg-query -W -f='${Version}' "$1"; fi
}

ptf_pkg_candidate() { # candidate version from the local apt lists, or empty
    LC_ALL=C apt-cache policy "$1" 2>/dev/null | awk '/Candidate:/ { print $2; exit }' | sed 's/^(none)$//'
}

ptf_pkg_exists() {    # known to apt (lists already downloaded)?
    [ -n "$(ptf_pkg_candidate "$1")" ]
}

# Print the packages that are missing, or 'postgresql-15' when it is older than
# the candidate or than PTF_PG_MIN_VERSION.  Empty output: nothing to do.
ptf_packages_todo() {
    local p v cand
    for p in "${PTF_PACKAGES[@]}"; do
        ptf_pkg_installed "$p" || echo "$p"
    done
    if ptf_pkg_exists postgresql-contrib && ! ptf_pkg_installed postgresql-contrib; then
        echo postgresql-contrib
    fi
    v=$(ptf_pkg_version postgresql-$PTF_PG_MAJOR)
    if [ -n "$v" ]; then
        cand=$(ptf_pkg_candidate postgresql-$PTF_PG_MAJOR)
        if [ -n "$cand" ] && [ "$cand" != "$v" ]; then
            echo "postgresql-$PTF_PG_MAJOR(upgrade $v -> $cand)"
        elif dpkg --compare-versions "$v" lt "$PTF_PG_MIN_VERSION"; then
            echo "postgresql-$PTF_PG_MAJOR(upgrade $v -> >= $PTF_PG_MIN_VERSION)"
        fi
        # headers and client tools of the same minor release as the server
        for p in postgresql-server-dev-$PTF_PG_MAJOR postgresql-client-$PTF_PG_MAJOR; do
            cand=$(ptf_pkg_version "$p")
            [ -z "$cand" ] || [ "$cand" = "$v" ] || echo "$p(upgrade $cand -> $v)"
        done
    fi
}

ptf_ensure_packages() {
    local todo
    todo=$(ptf_packages_todo | tr '\n' ' ')
    if [ -z "${todo// /}" ]; then
        ptf_log "packages: all present, postgresql-$PTF_PG_MAJOR $(ptf_pkg_version postgresql-$PTF_PG_MAJOR) is current (apt skipped)"
    else
        [ "$(id -u)" -eq 0 ] || ptf_die "packages missing or outdated ($todo); run as root so apt-get can install them"
        command -v apt-get >/dev/null || ptf_die "apt-get not found: this script needs Debian 12 (bookworm)"
        ptf_log "packages: need $todo"
        # No default cluster "main" from postgresql-common: we only run throwaway
        # servers.  Only written on a machine that has no createcluster.conf yet;
        # UCF_FORCE_CONFFOLD keeps it when postgresql-common installs its own.
        if [ ! -e /etc/postgresql-common/createcluster.conf ]; then
            mkdir -p /etc/postgresql-common
            printf '# written by %s: no default cluster\ncreate_main_cluster = false\n' \
                "deduplicate_keep_first scripts/lib.sh" > /etc/postgresql-common/createcluster.conf
        fi
        export DEBIAN_FRONTEND=noninteractive UCF_FORCE_CONFFOLD=1
        ptf_log "apt-get update"
        apt-get update -q || ptf_die "apt-get update failed"
        local pkgs=("${PTF_PACKAGES[@]}")
        ptf_pkg_exists postgresql-contrib && pkgs+=(postgresql-contrib)
        ptf_log "apt-get install ${pkgs[*]}"
        apt-get install -y -q --no-install-recommends \
            -o Dpkg::Options::=--force-confdef -o Dpkg::Options::=--force-confold \
            "${pkgs[@]}" || ptf_die "apt-get install failed"
        todo=$(ptf_packages_todo | tr '\n' ' ')
        [ -z "${todo// /}" ] || ptf_die "still missing or outdated after apt-get: $todo"
        ptf_log "packages: postgresql-$PTF_PG_MAJOR $(ptf_pkg_version postgresql-$PTF_PG_MAJOR) installed"
    fi
    # PTF_PG_CONFIG set by the caller: another installation of PostgreSQL 15
    # (a developer's private copy, so that several checkouts test at once)
    if [ -z "${PTF_PG_CONFIG:-}" ]; then
        PTF_PG_CONFIG=/usr/lib/postgresql/$PTF_PG_MAJOR/bin/pg_config
        [ -x "$PTF_PG_CONFIG" ] || PTF_PG_CONFIG=$(command -v pg_config) || ptf_die "pg_config not found"
    fi
    [ -x "$PTF_PG_CONFIG" ] || ptf_die "PTF_PG_CONFIG=$PTF_PG_CONFIG is not an executable pg_config"
    PTF_BINDIR=$("$PTF_PG_CONFIG" --bindir)
    export PTF_PG_CONFIG PTF_BINDIR
    local ver
    ver=$("$PTF_BINDIR/postgres" --version | awk '{ print $3 }')
    dpkg --compare-versions "$ver" ge "$PTF_PG_MIN_VERSION" ||
        ptf_die "postgres $ver in $PTF_BINDIR is older than $PTF_PG_MIN_VERSION (needs output_plugin_libraries)"
    ptf_log "using PostgreSQL $ver ($PTF_BINDIR)"
}

# ---------------------------------------------------------------------------
# Build
# ---------------------------------------------------------------------------

ptf_build_install() {
    local kind="$*" stamp="$PTF_ROOT/.build-kind"
    [ -n "${PTF_PG_CONFIG:-}" ] || ptf_die "call ptf_ensure_packages first"
    [ "$(id -u)" -eq 0 ] || ptf_die "make install needs root"
    if [ "$(cat "$stamp" 2>/dev/null)" != "$kind" ]; then
        make -C "$PTF_ROOT" clean PG_CONFIG="$PTF_PG_CONFIG" >/dev/null
        printf '%s\n' "$kind" > "$stamp"
    fi
    ptf_log "build: make -j2 $kind in $PTF_ROOT (warnings are errors)"
    make -C "$PTF_ROOT" -j2 PG_CONFIG="$PTF_PG_CONFIG" "$@" || ptf_die "build failed"
    ptf_log "install: make install"
    make -C "$PTF_ROOT" install PG_CONFIG="$PTF_PG_CONFIG" "$@" >/dev/null || ptf_die "make install failed"
}

# ---------------------------------------------------------------------------
# Running things as postgres
# ---------------------------------------------------------------------------

# Run a command as the postgres OS user (directly when already that user),
# keeping the PG* variables, with bindir on PATH, its own HOME and TMPDIR=/tmp
# (pg_regress and the TAP framework make socket directories under TMPDIR).
ptf_as_postgres() {
    if [ "$(id -un)" = postgres ]; then
        "$@"
    else
        [ "$(id -u)" -eq 0 ] || ptf_die "need root (or the postgres user) to run: $*"
        id postgres >/dev/null 2>&1 || ptf_die "OS user postgres does not exist (is postgresql-$PTF_PG_MAJOR installed?)"
        # from a directory postgres may enter (not /root/...), else tools complain
        (
            runuser -u postgres -- test -x "$PWD" 2>/dev/null || cd /
            runuser -u postgres -- env LANG="$LANG" PATH="$PTF_BINDIR:$PATH" \
                HOME="$(getent passwd postgres | cut -d: -f6)" TMPDIR=/tmp \
                ${PGHOST:+PGHOST="$PGHOST"} ${PGPORT:+PGPORT="$PGPORT"} \
                ${PGUSER:+PGUSER="$PGUSER"} ${PGDATABASE:+PGDATABASE="$PGDATABASE"} \
                "$@"
        )
    fi
}

# psql against the server of ptf_pg_start: no psqlrc, stop on the first error.
ptf_psql() {
    ptf_as_postgres "$PTF_BINDIR/psql" -X -v ON_ERROR_STOP=1 "$@"
}

# A directory the postgres user owns, under /tmp.
ptf_mktemp_dir() {
    local d
    d=$(mktemp -d "/tmp/$1.XXXXXX")
    chmod 755 "$d"
    [ "$(id -u)" -ne 0 ] || chown postgres: "$d"
    echo "$d"
}

# ---------------------------------------------------------------------------
# Throwaway server
# ---------------------------------------------------------------------------

# Is something already using this port (a TCP listener on localhost, or a
# socket of the usual socket directories)?
ptf_port_busy() {
    local port=$1 dir
    for dir in /var/run/postgresql /tmp; do
        [ -e "$dir/.s.PGSQL.$port" ] && return 0
    done
    (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null && return 0
    return 1
}

ptf_free_port() {
    local port=${1:-5490}
    while ptf_port_busy "$port"; do
        port=$((port + 1))
        [ "$port" -lt 65000 ] || ptf_die "no free port found"
    done
    echo "$port"
}

# ptf_pg_start DIR: initdb DIR/data, configure, start, wait until it accepts
# connections.  DIR must exist (it is made owned by postgres).
ptf_pg_start() {
    local dir=$1 data port i
    [ -n "${PTF_BINDIR:-}" ] || ptf_die "call ptf_ensure_packages first"
    [ -d "$dir" ] || ptf_die "ptf_pg_start: no directory $dir"
    [ "$(id -u)" -ne 0 ] || chown postgres: "$dir"
    data=$dir/data
    ptf_log "server: initdb $data"
    ptf_as_postgres "$PTF_BINDIR/initdb" -D "$data" -A trust -U postgres --no-sync \
        >"$dir/initdb.log" 2>&1 || { cat "$dir/initdb.log" >&2; ptf_die "initdb failed"; }
    port=$(ptf_free_port 5490)
    {
        echo
        echo "# ---- added by scripts/lib.sh: the repo's test/ptf.conf ----"
        cat "$PTF_ROOT/test/ptf.conf"
        echo
        echo "# ---- added by scripts/lib.sh: throwaway server ----"
        echo "port = $port"
        echo "listen_addresses = ''"
        echo "unix_socket_directories = '$dir'"
        echo "fsync = off"
        # callers (bench/) may add settings of their own
        [ -z "${PTF_PG_CONF_EXTRA:-}" ] || printf '%s\n' "$PTF_PG_CONF_EXTRA"
    } >>"$data/postgresql.conf"
    ptf_log "server: starting on port $port, socket in $dir, log $dir/server.log"
    if ! ptf_as_postgres "$PTF_BINDIR/pg_ctl" -D "$data" -l "$dir/server.log" -w -t 60 start >/dev/null; then
        tail -n 30 "$dir/server.log" >&2 || true
        ptf_die "server did not start"
    fi
    export PGHOST=$dir PGPORT=$port PGUSER=postgres PGDATABASE=postgres
    for i in $(seq 1 60); do
        "$PTF_BINDIR/pg_isready" -q -h "$dir" -p "$port" && break
        [ "$i" -lt 60 ] || ptf_die "server on port $port not ready after 30s"
        sleep 0.5
    done
    ptf_log "server: ready (PGHOST=$PGHOST PGPORT=$PGPORT)"
}

ptf_pg_stop() {
    local dir=$1
    if [ -f "$dir/data/postmaster.pid" ]; then
        ptf_log "server: stopping ($dir)"
        ptf_as_postgres "$PTF_BINDIR/pg_ctl" -D "$dir/data" -m fast -w stop >/dev/null ||
            printf 'WARNING: pg_ctl stop failed for %s\n' "$dir" >&2
    fi
}

# ---------------------------------------------------------------------------
# Citus, for the distributed tests and bench/citus.sh
# ---------------------------------------------------------------------------

# A test-time dependency only (AGPL-3.0, never shipped nor linked): when the
# PostgreSQL of PTF_PG_CONFIG has no Citus, it is built from the vendored
# source, looked for at $PTF_CITUS_VENDOR, ../shared/vendor/citus beside the
# repository, then /work/shared/vendor/citus.  Returns 0 when Citus is
# installed; PTF_CITUS_NOTE says what was found, or why there is none.
ptf_citus_installed() {
    [ -f "$("$PTF_PG_CONFIG" --pkglibdir)/citus.so" ] &&
        [ -f "$("$PTF_PG_CONFIG" --sharedir)/extension/citus.control" ]
}

ptf_ensure_citus() {
    local d vendor=
    [ -n "${PTF_PG_CONFIG:-}" ] || ptf_die "call ptf_ensure_packages first"
    if ! ptf_citus_installed; then
        for d in "${PTF_CITUS_VENDOR:-}" "$PTF_ROOT/../shared/vendor/citus" /work/shared/vendor/citus; do
            if [ -n "$d" ] && [ -f "$d/build.sh" ]; then vendor=$(cd "$d" && pwd); break; fi
        done
        if [ -n "$vendor" ]; then
            ptf_log "citus: not installed for $PTF_PG_CONFIG; building it from $vendor (once, about 1.5 min)"
            bash "$vendor/build.sh" "$PTF_PG_CONFIG" || ptf_die "building Citus from $vendor failed"
        fi
    fi
    if ptf_citus_installed; then
        PTF_CITUS_NOTE="run, with Citus $(sed -n "s/^default_version = '\(.*\)'/\1/p" \
            "$("$PTF_PG_CONFIG" --sharedir)/extension/citus.control") of $("$PTF_PG_CONFIG" --pkglibdir)"
        return 0
    fi
    PTF_CITUS_NOTE="SKIPPED -- Citus is not installed for $PTF_PG_CONFIG, and no vendored Citus folder was found (\$PTF_CITUS_VENDOR, $PTF_ROOT/../shared/vendor/citus, /work/shared/vendor/citus)"
    return 1
}

# ---- benchmarks (bench/) ----

# ptf_bench_start [SETTINGS]: build and install, then start a throwaway
# server for a benchmark in PTF_BENCH_DIR (removed on exit), with settings
# for big data plus SETTINGS (postgresql.conf lines).
ptf_bench_start() {
    local huge=""
    ptf_sane_locale
    ptf_ensure_packages
    ptf_build_install
    PTF_BENCH_DIR=$(mktemp -d /tmp/ptf-bench.XXXXXX)
    PTF_BENCH_HUGEPAGES_WAS=""
    trap 'ptf_pg_stop "$PTF_BENCH_DIR" >/dev/null 2>&1 || true; rm -rf "$PTF_BENCH_DIR"
          [ -z "$PTF_BENCH_HUGEPAGES_WAS" ] || sysctl -q -w vm.nr_hugepages="$PTF_BENCH_HUGEPAGES_WAS" || true' EXIT
    # HUGE_PAGES=on: the shared buffers in 2 MB pages, reserved for the run
    # and given back after it -- a parallel worker, a fresh process, then
    # maps the buffers it reads with one fault per 2 MB instead of per 4 kB
    # (bench/README.md, Parallel calls)
    if [ "${HUGE_PAGES:-off}" = on ]; then
        PTF_BENCH_HUGEPAGES_WAS=$(sysctl -n vm.nr_hugepages)
        [ "$PTF_BENCH_HUGEPAGES_WAS" -ge 600 ] || sysctl -q -w vm.nr_hugepages=600
        [ "$(awk '/^HugePages_Free/ { print $2 }' /proc/meminfo)" -ge 576 ] ||
            ptf_die "HUGE_PAGES=on: could not reserve 576 huge pages of 2 MB for shared_buffers = 1GB"
        huge="huge_pages = on"
        ptf_log "bench: shared buffers in huge pages (vm.nr_hugepages $(sysctl -n vm.nr_hugepages), given back after)"
    fi
    export PTF_PG_CONF_EXTRA="shared_buffers = 1GB
max_wal_size = 8GB
checkpoint_timeout = 30min
$huge
${1:-}"
    ptf_pg_start "$PTF_BENCH_DIR"
}

# ptf_bench_times OUT: psql output with "@@ name" before a timed statement
# (and "@@" alone after it, when other statements follow) -> "name ms" lines.
ptf_bench_times() {
    awk '/^@@ [^ ]/{ name = $2; next } /^@@$/{ name = ""; next }
         /^Time: / && name != "" { print name, $2; name = "" }' "$1"
}

# ptf_bench_median TIMES NAME: the median time of NAME in a ptf_bench_times file.
ptf_bench_median() {
    awk -v n="$2" '$1 == n { print $2 }' "$1" | sort -n |
        awk '{ a[NR] = $1 } END { print a[int((NR + 1) / 2)] }'
}

# ptf_bench_ratio A B: "A/Bx" with two decimals.
ptf_bench_ratio() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.2fx", a / b }'; }
# ptf_bench_above MS FLOOR_MS ROWS: the cost above the floor, in ns per row.
ptf_bench_above() { awk -v t="$1" -v f="$2" -v n="$3" 'BEGIN { printf "%.0f", (t - f) * 1e6 / n }'; }
