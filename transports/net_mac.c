/* net_mac.c - frame MACs for the network transports (DDL_MAC=1): after the handshake every data
 * frame (prefix, payload) carries a 16-byte Poly1305 tag, so a relay in the middle cannot alter,
 * drop, reorder or replay gradients unseen. Poly1305 is a one-time MAC: each frame gets its own
 * key, the first 32 bytes of the ChaCha20 stream of the link's key under a nonce of direction and
 * frame number (as RFC 8439's AEAD derives its Poly1305 key). The link's key is an HMAC-SHA256 of
 * the token over both handshake nonces, so it is fresh for every connection and never sent.
 * Both on libsodium; without it (WITH_SODIUM=0) DDL_MAC=1 is refused at open. Nothing here
 * touches a socket. */
#include "net.h"

#include <string.h>

#ifdef DDL_WITH_SODIUM
#include <sodium.h>

_Static_assert(sizeof(crypto_onetimeauth_state) <= sizeof(((ddl__mac *)0)->state), "ddl__mac too small");
_Static_assert(DDL__MAC_BYTES == crypto_onetimeauth_BYTES, "tag size");

void ddl__mac_begin(ddl__mac *m, const unsigned char link_key[DDL__SHA256_BYTES], int dir, uint64_t frame)
{
    unsigned char nonce[crypto_stream_chacha20_NONCEBYTES], key[crypto_onetimeauth_KEYBYTES];
    ddl__put_le(nonce, frame, 7);
    nonce[7] = (unsigned char)dir;
    crypto_stream_chacha20(key, sizeof key, nonce, link_key);
    crypto_onetimeauth_init((crypto_onetimeauth_state *)(void *)m->state, key);
    sodium_memzero(key, sizeof key);
}

void ddl__mac_update(ddl__mac *m, const void *p, size_t n)
{
    if (n)
        crypto_onetimeauth_update((crypto_onetimeauth_state *)(void *)m->state, p, n);
}

void ddl__mac_final(ddl__mac *m, unsigned char tag[DDL__MAC_BYTES])
{
    crypto_onetimeauth_final((crypto_onetimeauth_state *)(void *)m->state, tag);
}

#else

void ddl__mac_begin(ddl__mac *m, const unsigned char link_key[DDL__SHA256_BYTES], int dir, uint64_t frame)
{
    (void)link_key, (void)dir, (void)frame;
    memset(m, 0, sizeof *m);
}
void ddl__mac_update(ddl__mac *m, const void *p, size_t n) { (void)m, (void)p, (void)n; }
void ddl__mac_final(ddl__mac *m, unsigned char tag[DDL__MAC_BYTES])
{
    (void)m;
    memset(tag, 0, DDL__MAC_BYTES);
}

#endif

/* ---- the links' keys ---- */

void ddl__mac_link_key(const ddl__net *n, const unsigned char *nonce_c, const unsigned char *nonce_a, int rank_c,
                       int rank_a, unsigned char out[DDL__SHA256_BYTES])
{
#ifdef DDL_WITH_SODIUM
    (void)!sodium_init(); /* before the first MAC: picks libsodium's fastest code (idempotent, thread-safe) */
#endif
    unsigned char msg[16 + 2 * DDL__NONCE_BYTES + 8], *p = msg;
    memcpy(p, "ddl frame key 1", 16); p += 16;
    memcpy(p, nonce_c, DDL__NONCE_BYTES); p += DDL__NONCE_BYTES;
    memcpy(p, nonce_a, DDL__NONCE_BYTES); p += DDL__NONCE_BYTES;
    ddl__put_le(p, (uint32_t)rank_c, 4); p += 4;
    ddl__put_le(p, (uint32_t)rank_a, 4); p += 4;
    ddl__hmac_sha256(n->token ? n->token : "", n->token_bytes, msg, (size_t)(p - msg), out);
}

void ddl__mac_frame_begin(ddl__net *n, int peer, int sending, ddl__mac *m)
{
    ddl__net_peer *q = &n->peers[peer];
    if (sending)
        ddl__mac_begin(m, q->tx_key, q->tx_dir, q->tx_frames++);
    else
        ddl__mac_begin(m, q->rx_key, q->rx_dir, q->rx_frames++);
}

void ddl__mac_frame_tag(ddl__net *n, int peer, const unsigned char *pre, const void *buf, size_t bytes,
                        unsigned char tag[DDL__MAC_BYTES])
{
    ddl__mac m;
    ddl__mac_frame_begin(n, peer, 1, &m);
    ddl__mac_update(&m, pre, DDL__FRAME_PREFIX);
    ddl__mac_update(&m, buf, bytes);
    ddl__mac_final(&m, tag);
}

int ddl__mac_frame_check(ddl__net *n, int peer, ddl__mac *m, const unsigned char tag[DDL__MAC_BYTES])
{
    unsigned char want[DDL__MAC_BYTES];
    ddl__mac_final(m, want);
    if (ddl__ct_equal(want, tag, DDL__MAC_BYTES))
        return DDL_OK;
    ddl__net_link_down(n, peer, DDL_EPROTO, 1, 1);
    return ddl__net_fail(n, DDL_EPROTO, "rank %d at %s: a message failed its MAC check (altered on the way, or a "
                         "relay between the ranks); rank %d reads no more from it", peer, n->peers[peer].addr, n->rank);
}
