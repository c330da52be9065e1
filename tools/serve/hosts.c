/* hosts.c - which Host and Origin headers name this server. A web page elsewhere must not drive
 * ddl-serve through its visitor's browser: by DNS rebinding (evil.example resolves to 127.0.0.1,
 * and the browser sends Host: evil.example) or by a cross-site POST (the browser sends the
 * other site's Origin). So Host must be an IP address (which no rebinding can borrow),
 * "localhost", --listen's host, or a name given with --allow-host; an Origin, when sent, must be
 * this very server (the page at / talking to its own API) or a host --allow-host names.
 * --allow-host '*' turns both checks off (behind a proxy that rewrites Host). */
#include "serve.h"

#include <arpa/inet.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

/* split: the host of "HOST", "HOST:PORT", "[V6]" or "[V6]:PORT" into out (without brackets). */
static int split(const char *s, char *out, size_t cap)
{
    size_t n;
    if (s[0] == '[') {
        const char *end = strchr(s, ']');
        if (!end || (end[1] && end[1] != ':'))
            return -1;
        s++, n = (size_t)(end - s);
    } else {
        const char *colon = strchr(s, ':');
        n = colon ? (size_t)(colon - s) : strlen(s);
        if (colon && strchr(colon + 1, ':'))
            return -1;
    }
    if (n == 0 || n >= cap)
        return -1;
    memcpy(out, s, n);
    out[n] = '\0';
    return 0;
}

static int is_ip(const char *h)
{
    unsigned char a[16];
    return inet_pton(AF_INET, h, a) == 1 || inet_pton(AF_INET6, h, a) == 1;
}

static int allowed_name(const char *h)
{
    for (int i = 0; i < sv_srv->n_allow_hosts; i++)
        if (strcasecmp(h, sv_srv->allow_hosts[i]) == 0)
            return 1;
    return 0;
}

const char *sv_host_check(const char *host, const char *origin, char *why, size_t why_bytes)
{
    char h[256];
    if (sv_srv->any_host)
        return NULL;
    if (host) { /* HTTP/1.0 may send none: no browser does, and rebinding needs a browser */
        if (split(host, h, sizeof h) != 0 || !(is_ip(h) || strcasecmp(h, "localhost") == 0 ||
                                               strcasecmp(h, sv_srv->listen_host) == 0 || allowed_name(h))) {
            snprintf(why, why_bytes, "Host \"%.100s\" does not name this server (an IP address, localhost, %.100s "
                     "or a name given with --allow-host)", host, sv_srv->listen_host);
            return why;
        }
    }
    if (!origin)
        return NULL;
    const char *sep = strstr(origin, "://");
    int same = sep && host && strcasecmp(sep + 3, host) == 0;
    if (same || (sep && split(sep + 3, h, sizeof h) == 0 && allowed_name(h)))
        return NULL;
    snprintf(why, why_bytes, "Origin \"%.100s\": a page of another site may not use this server (give its host "
             "with --allow-host to let it)", origin);
    return why;
}
