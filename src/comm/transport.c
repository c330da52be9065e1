/* transport.c - the one door to a transport plugin (as sqlite's os.c is to the OS): every call
 * into a ddl_transport table, and every check of its version and of the members a version
 * brings, is here. The rest of src/comm asks these functions and never reads the table, so what
 * ddl needs of a transport reads in one place, and whatever stands between the core and the
 * transport (a counter, a fault injected for a test) has one place to go.
 * Owns: the version rules (1: the base; 2 added interrupt, 3 allgather, 4 exchange_view: a
 * member past the table's version is never read, so an older transport's shorter table works),
 * and turning optional members into "none". Must not: decide anything about the protocol
 * (headers, retries, blame): that is comm.c's. */
#include "impl.h"

int ddl__tp_check(const ddl_transport *t, char *err, size_t err_bytes)
{
    if (t && (t->version < 1 || t->version > DDL_TRANSPORT_VERSION || !t->state_bytes || !t->open || !t->close ||
              !t->exchange))
        return ddl__errf(err, err_bytes, DDL_ENOTSUP, "transport %s: version %d or missing members (need version %d)",
                         t->name ? t->name : "?", t->version, DDL_TRANSPORT_VERSION);
    return DDL_OK;
}

size_t ddl__tp_state_bytes(const ddl_transport *t, const ddl_comm_config *cfg)
{
    return t ? t->state_bytes(cfg) : 0;
}

void ddl__tp_limits(ddl_comm *c, int want_native)
{
    const ddl_transport *t = c->tp;
    c->native = want_native && t && t->allreduce;
    c->post_max = t && t->version >= 3 && t->allgather ? t->allgather_max : 0;
    c->view_max = t && t->version >= 4 && t->exchange_view ? t->view_max : 0;
}

const char *ddl__tp_name(const ddl_comm *c) { return c && c->tp ? c->tp->name : "none"; }

int ddl__tp_open(ddl_comm *c, const ddl_comm_config *cfg)
{
    int st = c->tp->open(c->state, cfg);
    c->opened = 1; /* close is safe after a failed open */
    return st;
}

void ddl__tp_close(ddl_comm *c)
{
    if (c->tp && c->opened)
        c->tp->close(c->state);
    c->opened = 0;
}

const char *ddl__tp_error(const ddl_comm *c)
{
    const char *e = c->tp && c->tp->error ? c->tp->error(c->state) : NULL;
    return e ? e : "";
}

const char *ddl__tp_peer_address(const ddl_comm *c, int peer)
{
    return c->tp->peer_address && peer >= 0 ? c->tp->peer_address(c->state, peer) : NULL;
}

int ddl__tp_exchange(ddl_comm *c, int to, const void *send_hdr, const void *send_buf, size_t send_bytes, int from,
                     void *recv_hdr, void *recv_buf, const void **view, size_t recv_bytes, int timeout_ms)
{
    if (view) /* only when c->view_max says the transport has it */
        return c->tp->exchange_view(c->state, to, send_hdr, send_buf, send_bytes, from, recv_hdr, view, recv_bytes,
                                    timeout_ms);
    return c->tp->exchange(c->state, to, send_hdr, send_buf, send_bytes, from, recv_hdr, recv_buf, recv_bytes,
                           timeout_ms);
}

int ddl__tp_allgather(ddl_comm *c, const void *hdr, const void *buf, size_t bytes, void *hdrs, const void **views)
{
    return c->tp->allgather(c->state, hdr, buf, bytes, hdrs, views, c->timeout_ms);
}

int ddl__tp_allreduce(ddl_comm *c, float *buf, size_t count)
{
    return c->tp->allreduce(c->state, buf, count, c->timeout_ms);
}

void ddl__tp_interrupter(const ddl_comm *c, void (**fn)(void *state, int culprit), void **state)
{
    *fn = c->tp && c->tp->version >= 2 ? c->tp->interrupt : NULL;
    *state = c->state;
}
