/* hostlist.h - the hosts of a cluster job as mpirun and horovodrun take them: `-H a:4,b:4` and a
 * hostfile of "HOST [slots=N]" lines. For programs only (ddlrun): a bad list (or a host name
 * that is not one) gets one line naming where it came from and exit status 2, as tools/cli.h does. */
#ifndef DDL_HOSTLIST_H
#define DDL_HOSTLIST_H

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tools/cli.h"

#define HOSTLIST_MAX 256

typedef struct hostlist_host {
    char name[256];
    int slots;
} hostlist_host;

/* hostlist_name_ok: name is a host name or address: [A-Za-z0-9._:-] only, or an IPv6 address
 * in brackets, and no leading '-'. A host name goes into the agent's command line (ssh HOST), where
 * "-oProxyCommand=..." would be an option, and into the master's address. */
static inline int hostlist_name_ok(const char *name)
{
    size_t len = strlen(name), i = 0;
    int v6 = name[0] == '[';
    if (v6 && (len < 3 || name[len - 1] != ']'))
        return 0;
    if (v6)
        i = 1, len--;
    if (name[i] == '-')
        return 0;
    for (; i < len; i++) {
        char c = name[i];
        if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' || c == '_' ||
              c == ':' || c == '-' || (v6 && c == '%'))) /* fe80::1%eth0: a link-local address's zone */
            return 0;
    }
    return 1;
}

/* hostlist_add: host `name` with `slots` slots as entry *n of h (what: where it came from). */
static inline void hostlist_add(hostlist_host *h, int *n, const char *name, int slots, const char *what)
{
    size_t len = strlen(name);
    if (*n == HOSTLIST_MAX || len == 0 || len >= sizeof h[0].name) {
        fprintf(stderr, "%s: %s: %s\n", cli_prog, what,
                len ? "too many hosts, or a name too long" : "an empty host name");
        exit(2);
    }
    if (!hostlist_name_ok(name)) {
        fprintf(stderr, "%s: %s: host '%s': expected a host name or address (letters, digits, '.', '_', ':', '-', "
                "not first; an IPv6 address in brackets)\n", cli_prog, what, name);
        exit(2);
    }
    memcpy(h[*n].name, name, len + 1);
    h[(*n)++].slots = slots;
}

/* hostlist_parse: -H a:4,b:4 ("a" alone has 1 slot, at most max_slots) into h; returns the count. */
static inline int hostlist_parse(const char *list, hostlist_host *h, int max_slots)
{
    int n = 0;
    for (const char *p = list; *p;) {
        size_t len = strcspn(p, ",");
        char item[300];
        snprintf(item, sizeof item, "%.*s", (int)(len < 299 ? len : 299), p);
        char *colon = strrchr(item, ':'), *bracket = strrchr(item, ']');
        int slots = 1;
        if (colon && (!bracket || colon > bracket)) { /* [v6]:4 has slots, [v6] none */
            *colon = '\0';
            slots = cli_int("-H", colon + 1, 1, max_slots);
        }
        hostlist_add(h, &n, item, slots, "-H");
        p += len + (p[len] == ',');
    }
    return n;
}

/* hostlist_read: a hostfile, "HOST [slots=N]" a line as mpirun's (blank lines and # comments
 * skipped), into h; returns the count (at least 1). */
static inline int hostlist_read(const char *path, hostlist_host *h, int max_slots)
{
    int n = 0;
    FILE *f = fopen(path, "r");
    if (!f) {
        fprintf(stderr, "%s: --hostfile %s: %s\n", cli_prog, path, strerror(errno));
        exit(2);
    }
    char line[512];
    for (int ln = 1; fgets(line, sizeof line, f); ln++) {
        line[strcspn(line, "#\r\n")] = '\0';
        char name[300], extra[300] = "";
        int fields = sscanf(line, "%299s %299s", name, extra);
        if (fields < 1)
            continue;
        int slots = 1;
        char where[400];
        snprintf(where, sizeof where, "--hostfile %s line %d", path, ln);
        if (fields == 2) {
            if (strncmp(extra, "slots=", 6) != 0)
                cli_bad(where, extra, "slots=N");
            slots = cli_int(where, extra + 6, 1, max_slots);
        }
        hostlist_add(h, &n, name, slots, where);
    }
    fclose(f);
    if (n == 0) {
        fprintf(stderr, "%s: --hostfile %s: no hosts in it\n", cli_prog, path);
        exit(2);
    }
    return n;
}

#endif
