/* zmq.c - the ZeroMQ transport. A stub for now: a later issue fills it in; until then the
 * getter returns NULL, as for a transport compiled out, so everything links. */
#include "ddl.h"

const ddl_transport *ddl_transport_zmq(void) { return NULL; }
