/* heartbeat_start.c - a comm's heartbeat begins: this rank's card (its addresses and keys,
 * heartbeat.c), everyone's by an allgather, then the thread. The roll call of the membership
 * floor: at create (create.c) and after every regroup (elastic.c), over the collectives below. */
#include "impl.h"

int ddl__comm_start_heartbeat(ddl_comm *c, const ddl_comm_config *cfg, char *err, size_t err_bytes)
{
    unsigned char *mine = c->hb_cards + (size_t)c->rank * DDL__HB_CARD_BYTES;
    int st = ddl__hb_card(c, cfg, mine, err, err_bytes);
    if (st != DDL_OK)
        return st;
    st = ddl_comm_allgather(c, mine, c->hb_cards, DDL__HB_CARD_BYTES / 8, DDL_INT64);
    if (st != DDL_OK) {
        ddl__hb_stop(&c->hb);
        return ddl__errf(err, err_bytes, st, "rank %d: exchanging heartbeat addresses: %s", c->rank, c->err);
    }
    return ddl__hb_begin(c, c->hb_cards, err, err_bytes);
}
