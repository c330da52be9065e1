/* options.c - ddlrun's command line, and with -H or --hostfile its hosts: which are used and how
 * many ranks each gets. The only file that includes tools/cli.h (and hostlist.h, which reports
 * through it): their messages name the program cli_start set here. */
#include "ddlrun.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tools/cli.h"
#include "tools/hostlist.h"

_Static_assert(MAX_HOSTS == HOSTLIST_MAX, "ddlrun.h's MAX_HOSTS is hostlist.h's HOSTLIST_MAX");

static hostlist_host hosts[HOSTLIST_MAX]; /* -H or --hostfile; opts.host points into it */

#define USAGE                                                                                                \
    "usage: ddlrun -n N [-t shm|tcp|zmq|mpi] [--nodes K --node-rank R --master HOST:PORT]\n"                 \
    "              [--timeout S] [--tag-output | --log-dir DIR] [--job ID] [--token-file F]\n"              \
    "              [--restarts R] [--bind cores|none] [-x VAR[=VALUE]]... [--] PROGRAM [ARGS...]\n"          \
    "       ddlrun [-np TOTAL] -H HOST[:SLOTS],... | --hostfile FILE [--ssh-agent CMD] [flags as above]\n"  \
    "              [--] PROGRAM [ARGS...]\n"                                                                \
    "Start N ranks of PROGRAM on this machine, or on several hosts over ssh, with the DDL_* environment\n"  \
    "set; everything after PROGRAM goes to it unchanged.\n"                                                  \
    "  -n N, --nproc-per-node N   ranks to start on this machine (-np N too, without -H)\n"                 \
    "  -H HOST[:SLOTS],...  start ranks on these hosts, SLOTS each (default 1), over ssh; ddlrun must\n"    \
    "                  be at the same path on every host, PROGRAM too (relative to the same directory)\n" \
    "  --hostfile F    the hosts from F: one \"HOST [slots=N]\" a line, as mpirun's; # comments\n"          \
    "  -np TOTAL       with -H or --hostfile: ranks in all, filling the hosts in order (default: all\n"     \
    "                  slots); every host used must get the same number\n"                                 \
    "  --ssh-agent CMD runs CMD HOST COMMAND instead of ssh -o BatchMode=yes -o ConnectTimeout=10 HOST\n"  \
    "                  COMMAND: e.g. \"ssh -o BatchMode=yes -i KEY -o UserKnownHostsFile=FILE\"\n"               \
    "  -x VAR[=VALUE]  pass VAR (from here, or set to VALUE) to the ranks on every host (repeatable)\n"      \
    "  --log-dir DIR   each rank's stdout and stderr to DIR/rank.N.log (DIR on each host)\n"                 \
    "  -t, --transport T   shm (default on one node), tcp (default on several), zmq or mpi\n"                \
    "  --nodes K       machines in the job (run ddlrun once on each); default 1\n"                           \
    "  --node-rank R   this machine's index, 0 <= R < K (rank = R * N + local rank)\n"                       \
    "  --master H:P    rendezvous address of rank 0 (required with --nodes > 1; with -H: first host:29500)\n" \
    "  --timeout S     seconds any blocking operation may wait (DDL_TIMEOUT_MS)\n"                           \
    "  --tag-output    prefix every output line with \"[rank] \"\n"                                          \
    "  --job ID        job id (default: $DDL_JOB, else random; with --nodes > 1 an HMAC of --master keyed\n"  \
    "                  by the token, so the nodes agree and strangers cannot know it)\n"                     \
    "  --token-file F  the job's secret (DDL_TOKEN) from the first line of F, which only you may read;\n"    \
    "                  required with --nodes > 1 unless DDL_TOKEN is set (or DDL_INSECURE=1)\n"              \
    "  --restarts R    when a rank fails, stop all ranks and start them all again, up to R times (on\n"     \
    "                  one node, or with -H on every host). The program must continue from its own\n"      \
    "                  checkpoint, e.g. lenet --checkpoint PATH --checkpoint-every N --resume; each\n"     \
    "                  restart gets a new job id (JOB-rK), a new port (one node) and DDL_RESTART=K\n"      \
    "  --elastic MIN:MAX  elastic training (DDL_ELASTIC): when a rank dies or stops, the others regroup\n"  \
    "                  and go on in the same processes while at least MIN live (see docs/TRAINING.md);\n" \
    "                  ddlrun then reports the rank lost and does not stop the others. MAX (>= N) is the\n" \
    "                  most ranks (the shards of the global batch). A killed rank's replacement joins\n" \
    "                  at the next step (one node, -H, --hostfile, or a DDL_PEERS given)\n"             \
    "  --replacements R  per node (default 3 per rank; 0: only shrink)\n"                               \
    "  --bind cores    local rank i of N runs on the i-th N-th of the CPUs ddlrun may use (none: the\n"      \
    "                  default, the scheduler places them); nothing is bound with more ranks than CPUs\n"  \
    "  -h, --help      this text\n"                                                                          \
    "  --version       ddlrun's version\n"                                                                   \
    "Sets DDL_RANK, DDL_WORLD_SIZE, DDL_LOCAL_RANK, DDL_LOCAL_SIZE, DDL_MASTER, DDL_JOB, DDL_TRANSPORT,\n"   \
    "DDL_TIMEOUT_MS, and DDL_TOKEN: from --token-file, else as set, else on one node (or with -H) a\n"      \
    "random one. With -H the token and the -x variables reach the hosts on the agent's stdin, never on a\n" \
    "command line; a host's ranks stop when that stdin closes (the head ddlrun or its ssh is gone).\n"     \
    "SIGINT, SIGTERM and SIGHUP stop the ranks; SIGUSR1 (a preemption notice) is passed on to them.\n"

/* read_hosts: -H or --hostfile: the hosts into o->host, as many as -np TOTAL fills in order (all
 * their slots without it), the same number of ranks on each (o->per); exit 2 if that cannot be. */
static void read_hosts(opts *o)
{
    int n_hosts = o->hosts ? hostlist_parse(o->hosts, hosts, MAX_RANKS) : hostlist_read(o->hostfile, hosts, MAX_RANKS);
    int slots = 0;
    for (int i = 0; i < n_hosts; i++)
        slots += hosts[i].slots;
    int total = o->np ? o->np : slots;
    if (total > slots) {
        fprintf(stderr, "ddlrun: -np %d: the hosts have only %d slots\n", total, slots);
        exit(2);
    }
    int k = 0, per = 0;
    for (int left = total; left > 0; k++) { /* fill the hosts in order */
        int here = hosts[k].slots < left ? hosts[k].slots : left;
        if (k > 0 && here != per) {
            fprintf(stderr, "ddlrun: %d ranks on %s but %d on %s: every host used needs the same number (for "
                            "now)\n", per, hosts[0].name, here, hosts[k].name);
            exit(2);
        }
        per = here;
        left -= here;
        o->host[k] = hosts[k].name;
    }
    o->n_used = k;
    o->per = per;
}

/* parse_args: ddlrun's own flags, up to PROGRAM (the first operand, or what follows "--"). */
void parse_args(int argc, char **argv, opts *o)
{
    static const char *const transports[] = {"shm", "tcp", "zmq", "mpi", NULL};
    enum { NODES = 256, NODE_RANK, MASTER, TIMEOUT, TAG_OUTPUT, JOB, RESTARTS, TOKEN_FILE, HOSTFILE, AGENT, ELASTIC, REPLACEMENTS,
           LOG_DIR, ENV_STDIN, BIND };
    static const char *const binds[] = {"none", "cores", NULL};
    static const struct option options[] = {
        {"transport", required_argument, NULL, 't'}, {"nodes", required_argument, NULL, NODES},
        {"node-rank", required_argument, NULL, NODE_RANK}, {"master", required_argument, NULL, MASTER},
        {"timeout", required_argument, NULL, TIMEOUT}, {"tag-output", no_argument, NULL, TAG_OUTPUT},
        {"job", required_argument, NULL, JOB}, {"restarts", required_argument, NULL, RESTARTS},
        {"elastic", required_argument, NULL, ELASTIC}, {"replacements", required_argument, NULL, REPLACEMENTS},
        {"token-file", required_argument, NULL, TOKEN_FILE}, {"nproc-per-node", required_argument, NULL, 'n'},
        {"hostfile", required_argument, NULL, HOSTFILE}, {"ssh-agent", required_argument, NULL, AGENT},
        {"log-dir", required_argument, NULL, LOG_DIR}, {"bind", required_argument, NULL, BIND},
        {"env-stdin", no_argument, NULL, ENV_STDIN}, /* hidden */
        CLI_HELP_VERSION, {NULL, 0, NULL, 0}};
    memset(o, 0, sizeof *o);
    o->replacements = -1;
    o->nodes = 1;
    cli_start(argv, "ddlrun");
    /* "+": stop at the first operand, PROGRAM, so that its own flags stay its own */
    for (int c; (c = getopt_long(argc, argv, "+hn:t:H:x:", options, NULL)) != -1;) {
        switch (c) {
        case 'n':
            if (!strcmp(argv[optind - 1], "-np") && optind < argc) /* mpirun's -np N: with -H, the total */
                o->np = cli_int("-np", argv[optind++], 1, MAX_RANKS * HOSTLIST_MAX);
            else
                o->n = cli_int("-n", optarg, 1, MAX_RANKS);
            break;
        case 'H': o->hosts = optarg; break;
        case HOSTFILE: o->hostfile = optarg; break;
        case AGENT: o->agent = optarg; break;
        case LOG_DIR: o->log_dir = optarg; break;
        case ENV_STDIN: o->env_stdin = 1; break;
        case 'x':
            if (o->nx == MAX_XVARS || !optarg[0] || optarg[0] == '=' || strchr(optarg, '\n'))
                cli_bad("-x", optarg, "VAR or VAR=VALUE (one line; at most 64 of them)");
            o->xvars[o->nx++] = optarg;
            break;
        case 't': o->transport = transports[cli_word("-t", optarg, transports)]; break;
        case NODES: o->nodes = cli_int("--nodes", optarg, 1, 1000000); break;
        case NODE_RANK: o->node_rank = cli_int("--node-rank", optarg, 0, 999999); break;
        case MASTER:
            if (!strchr(optarg, ':'))
                cli_bad("--master", optarg, "HOST:PORT");
            o->master = optarg;
            break;
        case TIMEOUT: o->timeout_s = cli_float("--timeout", optarg, 0.001, 2e6); break;
        case TAG_OUTPUT: o->tag_output = 1; break;
        case BIND: o->bind = cli_word("--bind", optarg, binds); break;
        case JOB: o->job = optarg; break;
        case TOKEN_FILE: o->token_file = optarg; break;
        case RESTARTS: o->restarts = cli_int("--restarts", optarg, 0, 1000000); break;
        case REPLACEMENTS: o->replacements = cli_int("--replacements", optarg, 0, 1000000); break;
        case ELASTIC: {
            char tail = 0;
            if (sscanf(optarg, "%d:%d%c", &o->elastic_min, &o->elastic_max, &tail) != 2 || o->elastic_min < 1 ||
                o->elastic_max < o->elastic_min || o->elastic_max > 256)
                cli_bad("--elastic", optarg, "MIN:MAX with 1 <= MIN <= MAX <= 256");
            break;
        }
        case 'h': cli_help(USAGE); break;
        case 'V': cli_version(); break;
        default: cli_try(); /* getopt_long named the flag */
        }
    }
    if (optind >= argc)
        cli_error("no PROGRAM to run");
    o->argv = argv + optind;
    if (o->hosts || o->hostfile) {
        if (o->hosts && o->hostfile)
            cli_error("give -H or --hostfile, not both");
        if (o->n)
            cli_error("with -H or --hostfile, -np TOTAL counts the ranks (-n is per node, for one node)");
        if (o->nodes > 1 || o->node_rank)
            cli_error("with -H or --hostfile, ddlrun picks --nodes and --node-rank itself");
        if (o->transport && !strcmp(o->transport, "shm"))
            cli_error("shm works on one machine only; use -t tcp with -H or --hostfile");
        read_hosts(o);
        return;
    }
    if (o->n == 0)
        o->n = o->np;
    if (o->n == 0)
        cli_error("-n N is required (ranks to start on this machine)");
    if (o->node_rank >= o->nodes)
        cli_error("--node-rank must be below --nodes");
    if (o->nodes > 1 && !o->master)
        cli_error("--master HOST:PORT is required with --nodes > 1");
    if (o->restarts && o->nodes > 1)
        cli_error("--restarts works on one node only (each node would restart on its own)");
    if (o->transport && !strcmp(o->transport, "shm") && o->nodes > 1)
        cli_error("shm works on one machine only; use -t tcp with --nodes > 1");
    if (o->elastic_min && (o->elastic_min > o->n * o->nodes || o->elastic_max < o->n * o->nodes))
        cli_error("--elastic MIN:MAX needs MIN <= the ranks started <= MAX");
    if (o->elastic_min && o->restarts)
        cli_error("give --elastic or --restarts, not both");
    if (o->replacements >= 0 && !o->elastic_min)
        cli_error("--replacements goes with --elastic");
    if (o->n > MAX_RANKS)
        cli_error("-np: at most 1024 ranks on one node");
}
