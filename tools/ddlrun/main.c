/* main.c - ddlrun on one node: the command line (options.c), then with -H or --hostfile the head
 * of a cluster job (head.c); else this node's ranks started (spawn.c) with their environment
 * (env.c), supervised until they have all exited (supervise.c), and with --restarts started
 * again after a failure, each generation under a new job id. */
#include "ddlrun.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tools/outfile.h"

int main(int argc, char **argv)
{
    opts o;
    parse_args(argc, argv, &o);
    if (o.hosts || o.hostfile)
        return head_main(&o);
    if (o.env_stdin)
        read_env_stdin();
    set_xvars(&o);
    setup_env(&o);
    char why[4200];
    o.log_fd = -1; /* held all along: a restart's or a replacement's log goes where the first went */
    if (o.log_dir && (o.log_fd = outdir_open(o.log_dir, why, sizeof why)) < 0)
        return fprintf(stderr, "ddlrun: --log-dir: %s\n", why), 1;
    const char *token = getenv("DDL_TOKEN");
    int replace = o.elastic_min && (o.nodes == 1 || getenv("DDL_PEERS"));
    if (replace && !(token && token[0])) { /* several nodes with DDL_INSECURE=1: the ranks keep a secret of their own */
        if (o.replacements != 0)
            fprintf(stderr, "ddlrun: --elastic without a token (DDL_INSECURE=1): a lost rank is not replaced (a "
                            "replacement must prove the job's token to join)\n");
        replace = 0;
    }
    signals_install(1);
    char base_job[128];
    snprintf(base_job, sizeof base_job, "%s", getenv("DDL_JOB"));
    ranks_prepare(&o);
    static rank ranks[MAX_RANKS];
    for (int k = 0;; k++) {
        if (k > 0)
            restart_env(&o, base_job, k);
        run u = {.ranks = ranks, .n = o.n, .watch_stdin = o.env_stdin, .elastic_min = o.elastic_min, .nodes = o.nodes,
                 .o = replace ? &o : NULL, .replace_left = o.replacements >= 0 ? o.replacements : 3 * o.n};
        for (int i = 0; i < o.n; i++) {
            memset(&ranks[i], 0, sizeof ranks[i]);
            ranks[i].id = o.node_rank * o.n + i;
            ranks[i].out[0] = ranks[i].out[1] = ranks[i].in = -1;
            spawn_rank(&o, &ranks[i], i);
            u.alive++;
        }
        supervise(&u, o.tag_output && !o.log_dir);
        if (!u.failed_pid || u.got_signal || k >= o.restarts)
            return report(&u);
        say_restart(&u, k + 1, o.restarts);
    }
}
