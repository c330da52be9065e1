# pg_server.sh - a private PostgreSQL server for the tests that need one (test_pg.sh,
# test_pg_ranks.sh, test_docs.sh). Source it after lib.sh. The server lives in a directory of the
# test's own: initdb in DIR/data, no TCP port, its Unix socket and log in DIR; as root it runs as
# Debian's user postgres (PostgreSQL refuses root). The caller stops it (pg_server_stop, from its
# EXIT trap), so that no postmaster outlives the test.

# pg_server_need: PGBIN (the server's programs) and AS (the prefix that runs a command as the
# server's user: empty, or "runuser -u postgres --" as root); returns 1 with PG_WHY set when no
# server can run here.
pg_server_need() {
    PGBIN=$(pg_config --bindir 2>/dev/null)
    AS=""
    if ! [ -x "$PGBIN/initdb" ] || ! [ -x "$PGBIN/pg_ctl" ] || ! [ -x "$PGBIN/psql" ]; then
        PG_WHY="no PostgreSQL server (Debian: postgresql-15)"; return 1
    fi
    if [ "$(id -u)" = 0 ]; then # PostgreSQL refuses to run as root: Debian's package made the user postgres
        if ! id postgres > /dev/null 2>&1 || ! command -v runuser > /dev/null; then
            PG_WHY="root, and no user postgres to run the server as"; return 1
        fi
        AS="runuser -u postgres --"
    fi
    return 0
}

# pg_server_init DIR [CONF]: a new cluster in DIR/data (DIR made readable, and owned by the
# server's user) whose postgresql.conf listens on a Unix socket in DIR only, without fsync, plus
# the lines CONF. Returns initdb's status; its output is in DIR/initdb.log.
pg_server_init() {
    chmod 755 "$1" && mkdir -p "$1/data" || return 1
    [ -n "$AS" ] && chown postgres "$1" "$1/data" # its socket and log go in DIR
    $AS "$PGBIN/initdb" -D "$1/data" -U postgres -A trust -E UTF8 --locale=C -N > "$1/initdb.log" 2>&1 || return 1
    printf "listen_addresses = ''\nunix_socket_directories = '%s'\nfsync = off\njit = off\n%s\n" "$1" "${2:-}" \
        >> "$1/data/postgresql.conf"
}

# pg_server_start DIR: start the cluster of DIR (30 s at most); on failure its logs' tails are
# printed and the status is non-zero.
pg_server_start() {
    $AS "$PGBIN/pg_ctl" -D "$1/data" -l "$1/server.log" -w -t 30 start > /dev/null 2>&1 && return 0
    tail -n 20 "$1/initdb.log" "$1/server.log"
    return 1
}

# pg_server_stop DIR: stop it at once, if it runs (for an EXIT trap).
pg_server_stop() {
    [ -f "$1/data/postmaster.pid" ] && $AS "$PGBIN/pg_ctl" -D "$1/data" -m immediate -w stop > /dev/null 2>&1
    return 0
}
