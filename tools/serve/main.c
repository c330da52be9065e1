/* main.c - ddl-serve's command line and lifetime: load every --model, start the reload thread
 * and the HTTP daemon (libmicrohttpd, --threads workers), print where it listens, and stop
 * cleanly on SIGINT or SIGTERM. The token comes from --token-file (a file only its owner may
 * read) or DDL_SERVE_TOKEN, never from the command line (where ps shows it to everyone); an
 * address other than loopback is served only with a token, or when --insecure says so. */
#include "serve.h"

#include <errno.h>
#include <netdb.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <arpa/inet.h>

#include "tools/cli.h"

#define USAGE                                                                                         \
    "usage: ddl-serve --model NAME=PATH [--model NAME=PATH]... [OPTION]...\n"                          \
    "Serve trained ddl models over HTTP: TensorFlow Serving's REST API, KServe v2, SageMaker's\n"      \
    "/ping and /invocations, Prometheus /metrics, and a web page at / to try them.\n"                  \
    "  --model NAME=PATH   a ddl checkpoint served as NAME (lenet's, unet's or ddl-train's: any layer\n" \
    "                      graph, classifying or segmenting); reloaded when replaced\n"               \
    "                      PATH may be a directory of versions, PATH/1/model.ckpt, PATH/2/...: the newest\n" \
    "                      is served, /versions/N reaches the others kept; new ones are loaded as they come\n" \
    "  --keep-versions K   versions of a directory kept loaded (default 2)\n"                          \
    "  --canary NAME=PCT   send PCT% of NAME's requests to its newest version, the rest to the one before\n" \
    "                      (decided per request by a hash of a counter and --canary-seed S, default 0)\n" \
    "  --log-requests FILE a JSON line per predict: time, model, version, input size and CRC, answer,\n" \
    "                      latency; written by a thread of its own (--log-queue N lines wait at most,\n" \
    "                      default 4096; more are dropped and counted), moved to FILE.1 past\n"       \
    "                      --log-max-mb M (default 64)\n"                                             \
    "  --listen HOST:PORT  where to listen (default 127.0.0.1:8501, TF Serving's REST port; 0: any free)\n"          \
    "  --logdir DIR        event files of training runs, plotted on the page's Training tab\n"        \
    "  --data DIR          Fashion-MNIST, for the scenes the page offers a U-Net model\n"             \
    "                      (default /usr/share/datasets/fashion-mnist)\n"                           \
    "  --threads N         HTTP worker threads, one predictor each (default 2)\n"                     \
    "  --max-batch N       run the requests to a model that arrive together as one pass of up to N\n" \
    "                      images (dynamic batching; at most one request per thread; default 1: off)\n" \
    "  --batch-timeout-us U  how long a batch waits to fill, microseconds (default 500, at most 10 s)\n" \
    "  --body-timeout S    close a connection whose request body is still arriving S seconds after\n" \
    "                      the request began (default 10)\n"                                         \
    "  --idle-timeout S    close a connection idle for S seconds (default 15)\n"                      \
    "  --token-file F      requests must carry Authorization: Bearer <F's first line>\n"              \
    "                      (or set DDL_SERVE_TOKEN); F must be readable by its owner only\n"           \
    "  --insecure          listen beyond loopback without a token (anyone who reaches the port may\n"  \
    "                      use the models)\n"                                                         \
    "  --allow-host NAME   also answer requests whose Host or Origin names NAME (repeatable; '*':\n"   \
    "                      any, as behind a proxy); by default only IP addresses, localhost and\n"    \
    "                      --listen's host, so that no other web page can use the server\n"           \
    "  --help, --version   this text; the version\n"

static sv_server server;
sv_server *sv_srv = &server;

static void read_token(const char *path)
{
    char buf[sizeof server.token + 2];
    struct stat st;
    FILE *f = fopen(path, "r");
    if (!f || fstat(fileno(f), &st) != 0) {
        fprintf(stderr, "ddl-serve: --token-file %s: %s\n", path, strerror(errno));
        exit(1);
    }
    if (st.st_mode & 077) {
        fprintf(stderr, "ddl-serve: --token-file %s: other users may read it (mode %03o); chmod 600 it\n", path,
                (unsigned)(st.st_mode & 0777));
        exit(2);
    }
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = 0;
    buf[strcspn(buf, "\r\n")] = 0;
    if (!buf[0] || strlen(buf) >= sizeof server.token) {
        fprintf(stderr, "ddl-serve: --token-file %s: expected a token of 1 to %zu characters on its first line\n",
                path, sizeof server.token - 1);
        exit(1);
    }
    snprintf(server.token, sizeof server.token, "%s", buf);
}

/* is_loopback: ss is 127.0.0.0/8, ::1 or ::ffff:127.x.x.x (0.0.0.0 and :: are every address). */
static int is_loopback(const struct sockaddr_storage *ss)
{
    if (ss->ss_family == AF_INET)
        return (ntohl(((const struct sockaddr_in *)ss)->sin_addr.s_addr) >> 24) == 127;
    const struct in6_addr *a = &((const struct sockaddr_in6 *)ss)->sin6_addr;
    return ss->ss_family == AF_INET6 &&
           (IN6_IS_ADDR_LOOPBACK(a) || (IN6_IS_ADDR_V4MAPPED(a) && a->s6_addr[12] == 127));
}

/* parse_listen: HOST:PORT (HOST may be [v6]) into ss, HOST into server.listen_host. */
static void parse_listen(const char *arg, struct sockaddr_storage *ss)
{
    char host[256];
    const char *colon = strrchr(arg, ':');
    if (!colon || colon == arg || (size_t)(colon - arg) >= sizeof host)
        cli_bad("--listen", arg, "HOST:PORT");
    int port = cli_int("--listen", colon + 1, 0, 65535);
    snprintf(host, sizeof host, "%.*s", (int)(colon - arg), arg);
    if (host[0] == '[' && host[strlen(host) - 1] == ']')
        memmove(host, host + 1, strlen(host)), host[strlen(host) - 1] = 0;
    struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM}, *ai;
    char ps[8];
    snprintf(ps, sizeof ps, "%d", port);
    if (getaddrinfo(host, ps, &hints, &ai) != 0)
        cli_bad("--listen", arg, "HOST:PORT with a host that resolves");
    memcpy(ss, ai->ai_addr, ai->ai_addrlen);
    freeaddrinfo(ai);
    snprintf(server.listen_host, sizeof server.listen_host, "%s", host);
}

typedef struct args {
    const char *models[SV_MAX_MODELS], *listen, *token_file;
    int n_models, threads, idle_timeout_s, insecure;
} args;

/* parse_args: the command line into a (and server's own fields); exits 2 on a bad one. */
static void parse_args(int argc, char **argv, args *a)
{
    static const struct option opts[] = {{"model", required_argument, NULL, 'm'},
                                         {"listen", required_argument, NULL, 'l'},
                                         {"logdir", required_argument, NULL, 'L'},
                                         {"data", required_argument, NULL, 'D'},
                                         {"threads", required_argument, NULL, 't'},
                                         {"body-timeout", required_argument, NULL, 'B'},
                                         {"idle-timeout", required_argument, NULL, 'I'},
                                         {"token-file", required_argument, NULL, 'T'},
                                         {"token", required_argument, NULL, 'X'},
                                         {"insecure", no_argument, NULL, 'N'},
                                         {"allow-host", required_argument, NULL, 'A'},
                                         {"keep-versions", required_argument, NULL, 'K'},
                                         {"canary", required_argument, NULL, 'C'},
                                         {"canary-seed", required_argument, NULL, 'S'},
                                         {"log-requests", required_argument, NULL, 'R'},
                                         {"log-max-mb", required_argument, NULL, 'M'},
                                         {"log-queue", required_argument, NULL, 'Q'},
                                         {"max-batch", required_argument, NULL, 'b'},
                                         {"batch-timeout-us", required_argument, NULL, 'u'},
                                         CLI_HELP_VERSION,
                                         {NULL, 0, NULL, 0}};
    *a = (args){.listen = "127.0.0.1:8501", .threads = 2, .idle_timeout_s = SV_IDLE_TIMEOUT_S};
    server.body_timeout_s = SV_BODY_TIMEOUT_S;
    server.reg.keep = 2, server.log_max_mb = 64, server.log_queue = 4096;
    server.max_batch = 1, server.batch_timeout_us = 500;
    cli_start(argv, "ddl-serve");
    for (int c; (c = getopt_long(argc, argv, "h", opts, NULL)) != -1;) {
        switch (c) {
        case 'm':
            if (a->n_models == SV_MAX_MODELS)
                cli_error("at most 16 --model");
            a->models[a->n_models++] = optarg;
            break;
        case 'l': a->listen = optarg; break;
        case 'L': server.logdir = optarg; break;
        case 'D': server.data = optarg; break;
        case 't': a->threads = cli_int("--threads", optarg, 1, 256); break;
        case 'B': server.body_timeout_s = cli_int("--body-timeout", optarg, 1, 3600); break;
        case 'I': a->idle_timeout_s = cli_int("--idle-timeout", optarg, 1, 86400); break;
        case 'T': a->token_file = optarg; break;
        case 'N': a->insecure = 1; break;
        case 'b': server.max_batch = cli_int("--max-batch", optarg, 1, 256); break;
        case 'u': server.batch_timeout_us = cli_int("--batch-timeout-us", optarg, 0, 10000000); break;
        case 'A':
            if (server.n_allow_hosts == 16)
                cli_error("at most 16 --allow-host");
            server.any_host |= strcmp(optarg, "*") == 0;
            server.allow_hosts[server.n_allow_hosts++] = optarg;
            break;
        case 'K': server.reg.keep = cli_int("--keep-versions", optarg, 1, SV_MAX_KEEP); break;
        case 'C':
            if (server.n_canary == SV_MAX_MODELS)
                cli_error("at most 16 --canary");
            server.canary[server.n_canary++] = optarg;
            break;
        case 'S': server.reg.canary_seed = (uint64_t)cli_long("--canary-seed", optarg, 0, 0x7fffffffL); break;
        case 'R': server.log_path = optarg; break;
        case 'M': server.log_max_mb = cli_float("--log-max-mb", optarg, 0.001, 1 << 20); break;
        case 'Q': server.log_queue = cli_int("--log-queue", optarg, 1, 1 << 20); break;
        case 'X': cli_error("--token: a token on the command line is seen by every user (ps); use --token-file F "
                            "or DDL_SERVE_TOKEN"); break;
        case 'h': cli_help(USAGE); break;
        case 'V': cli_version(); break;
        default: cli_try();
        }
    }
    cli_end(argc, argv, optind);
    if (!a->n_models)
        cli_error("give at least one --model NAME=PATH");
}

int main(int argc, char **argv)
{
    args a;
    parse_args(argc, argv, &a);
    const char *listen = a.listen;
    int threads = a.threads;
    struct sockaddr_storage addr;
    memset(&addr, 0, sizeof addr);
    parse_listen(listen, &addr);
    if (a.token_file)
        read_token(a.token_file);
    else if (getenv("DDL_SERVE_TOKEN") && *getenv("DDL_SERVE_TOKEN"))
        snprintf(server.token, sizeof server.token, "%s", getenv("DDL_SERVE_TOKEN"));
    if (!server.token[0] && !a.insecure && !is_loopback(&addr)) {
        fprintf(stderr, "ddl-serve: --listen %s without a token: anyone who reaches it may use the models; give "
                "--token-file F (or DDL_SERVE_TOKEN), or --insecure\n", listen);
        exit(2);
    }

    ddl_set_threads(1); /* parallelism comes from the HTTP threads: kernel threads would only compete */
    sv_arena_install();
    server.reg.threads = threads;
    for (int i = 0; i < a.n_models; i++) {
        char err[DDL_ERR_BYTES + 1024];
        if (sv_registry_add(&server.reg, a.models[i], err, sizeof err) != 0) {
            fprintf(stderr, "ddl-serve: %s\n", err);
            sv_registry_close(&server.reg);
            return 1;
        }
    }
    char err[DDL_ERR_BYTES + 1024];
    for (int i = 0; i < server.n_canary; i++)
        if (sv_registry_canary(&server.reg, server.canary[i], err, sizeof err) != 0) {
            fprintf(stderr, "ddl-serve: %s\n", err);
            sv_registry_close(&server.reg);
            return 2;
        }
    if (server.log_path && sv_reqlog_open(server.log_path, (size_t)(server.log_max_mb * 1048576), server.log_queue,
                                          err, sizeof err) != 0) {
        fprintf(stderr, "ddl-serve: %s\n", err);
        sv_registry_close(&server.reg);
        return 1;
    }
    if (server.max_batch > 1 && sv_batch_init(&server.reg) != 0) {
        fprintf(stderr, "ddl-serve: cannot set up dynamic batching\n");
        sv_registry_close(&server.reg);
        return 1;
    }
    struct rlimit rl; /* 1000 idle clients must not starve the rest: as many descriptors as allowed */
    if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < rl.rlim_max) {
        rl.rlim_cur = rl.rlim_max;
        setrlimit(RLIMIT_NOFILE, &rl);
    }
    sigset_t sigs;
    sigemptyset(&sigs);
    sigaddset(&sigs, SIGINT), sigaddset(&sigs, SIGTERM);
    pthread_sigmask(SIG_BLOCK, &sigs, NULL); /* every thread started below inherits the mask */
    signal(SIGPIPE, SIG_IGN);
    struct MHD_Daemon *d = sv_http_start((const struct sockaddr *)&addr, threads, a.idle_timeout_s);
    if (!d) {
        fprintf(stderr, "ddl-serve: cannot listen on %s: %s\n", listen, strerror(errno));
        sv_registry_close(&server.reg);
        return 1;
    }
    sv_registry_watch(&server.reg, 200);
    fprintf(stderr, "ddl-serve: listening on port %d (%s), %d thread%s%s, models:", sv_http_port(d), listen, threads,
            threads > 1 ? "s" : "", server.token[0] ? ", bearer token required" : "");
    if (server.max_batch > 1)
        fprintf(stderr, " [batches of up to %d images, %d us to fill]", server.max_batch, server.batch_timeout_us);
    for (int i = 0; i < server.reg.n; i++)
        fprintf(stderr, " %s (%s)", server.reg.models[i].name, server.reg.models[i].kind);
    fprintf(stderr, "\n");
    int sig;
    sigwait(&sigs, &sig);
    fprintf(stderr, "ddl-serve: %s, stopping\n", sig == SIGINT ? "interrupted" : "terminated");
    sv_batch_stop(&server.reg); /* batches forming run now: their requests are answered */
    sv_http_stop(d);
    sv_reqlog_close();
    sv_registry_close(&server.reg);
    return 0;
}
