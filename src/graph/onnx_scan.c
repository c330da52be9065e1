/* onnx_scan.c - looking ahead over an ONNX graph's nodes, for the patterns of onnx_import_act.c
 * (and whatever other family needs to know who reads a value): the readers of a value, the node
 * that makes one. Each call is a pass over the GraphProto's fields, skipping initializers by
 * their length; nothing is kept between calls, nothing allocated. */
#include "onnx_impl.h"

#include <string.h>

/* is_string: field f is the string s. */
static int is_string(const ddl__pb_field *f, const char *s)
{
    size_t len = strlen(s);
    return f->wire == 2 && (size_t)(f->s.end - f->s.p) == len && memcmp(f->s.p, s, len) == 0;
}

int ddl__onnx_readers(ddl__onnx_imp *m, const char *name, int k, ddl__onnx_node *out)
{
    ddl__pb_slice s = ddl__onnx_graph(m);
    ddl__pb_field f, e;
    int count = 0;
    while (ddl__pb_next(&s, &f) > 0) {
        if ((f.number != 1 && f.number != 12) || f.wire != 2)
            continue;
        int reads = 0; /* a node's inputs (1), a graph output's name (ValueInfoProto 1) */
        for (ddl__pb_slice x = f.s; !reads && ddl__pb_next(&x, &e) > 0;)
            reads = e.number == 1 && is_string(&e, name);
        if (reads && count == k && out) { /* a graph output: a node of no op */
            if (f.number == 12)
                memset(out->op, 0, sizeof out->op), out->n_in = out->n_out = 0;
            else if (ddl__onnx_node_read(m, f.s, out) != DDL_OK)
                return -1;
        }
        count += reads;
    }
    return count;
}

int ddl__onnx_producer(ddl__onnx_imp *m, const char *name, ddl__onnx_node *out)
{
    ddl__pb_slice s = ddl__onnx_graph(m);
    ddl__pb_field f, e;
    while (ddl__pb_next(&s, &f) > 0) {
        if (f.number != 1 || f.wire != 2)
            continue;
        for (ddl__pb_slice x = f.s; ddl__pb_next(&x, &e) > 0;)
            if (e.number == 2) { /* the first output */
                if (is_string(&e, name))
                    return ddl__onnx_node_read(m, f.s, out) == DDL_OK ? 0 : -1;
                break;
            }
    }
    return -1;
}
