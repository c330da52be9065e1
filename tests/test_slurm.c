/* test_slurm.c - Slurm's variables as srun sets them (src/comm/slurm.c, env.c): the first host of
 * a node list in Slurm's hostlist syntax, this node's tasks from SLURM_STEP_TASKS_PER_NODE, and a
 * whole srun step's configuration: ranks, world, local rank and size, the master's host and a
 * port all tasks derive alike, and tcp (not shm) when the step spans nodes. */
#include "check.h"
#include "comm/impl.h"

#include <stdlib.h>
#include <string.h>

static ddl_comm_env env; /* the master's and the job id's text */

static void first_host(const char *list, const char *want)
{
    char out[64];
    int rc = ddl__slurm_first_host(list, out, sizeof out);
    CHECK(want ? rc == 0 && strcmp(out, want) == 0 : rc == -1);
    if (want && (rc != 0 || strcmp(out, want) != 0))
        fprintf(stderr, "  %s: got '%s' (rc %d), want '%s'\n", list, rc ? "" : out, rc, want);
}

static void srun_task(int procid, int nodeid, int localid, const char *per_node, int want_local_size)
{
    setenv("SLURM_PROCID", procid == 0 ? "0" : procid == 3 ? "3" : "1", 1);
    setenv("SLURM_NODEID", nodeid == 0 ? "0" : "1", 1);
    setenv("SLURM_LOCALID", localid == 0 ? "0" : "1", 1);
    setenv("SLURM_STEP_TASKS_PER_NODE", per_node, 1);
    ddl_comm_config cfg;
    char err[256];
    int rc = ddl_comm_config_from_env(&cfg, &env, err, sizeof err);
    CHECK(rc == DDL_OK);
    if (rc != DDL_OK)
        fprintf(stderr, "  %s\n", err);
    CHECK(cfg.rank == procid && cfg.world_size == 4 && cfg.local_rank == localid && cfg.local_size == want_local_size);
    CHECK(cfg.master && strcmp(cfg.master, "node01:31195") == 0); /* 29500 + (4242 * 7 + 1) % 2000 */
    if (cfg.master && strcmp(cfg.master, "node01:31195") != 0)
        fprintf(stderr, "  master %s\n", cfg.master);
    CHECK(cfg.transport && strcmp(cfg.transport->name, want_local_size == 4 ? "shm" : "tcp") == 0);
}

/* job_of: the job id the environment gives now, into out ("" for none). */
static void job_of(char *out, size_t n)
{
    ddl_comm_config cfg;
    char err[256];
    CHECK(ddl_comm_config_from_env(&cfg, &env, err, sizeof err) == DDL_OK);
    snprintf(out, n, "%s", cfg.job ? cfg.job : "");
}

/* job_ids: with a token and no DDL_JOB, a step's job id is "slurm-" and 16 hex digits that all its
 * tasks agree on and that differ by step and by token (so two jobs of one user on a node get
 * their own shared memory, and nobody without the token can take the name first); DDL_JOB wins;
 * without a token there is none (the per-user default). */
static void job_ids(void)
{
    char a[64], b[64], c[64], d[64], e[64];
    setenv("SLURM_PROCID", "0", 1);
    job_of(a, sizeof a);
    setenv("SLURM_PROCID", "3", 1);
    job_of(b, sizeof b);
    setenv("SLURM_STEP_ID", "2", 1);
    job_of(c, sizeof c);
    setenv("SLURM_STEP_ID", "1", 1);
    setenv("DDL_TOKEN", "another-secret-0123456789", 1);
    job_of(d, sizeof d);
    setenv("DDL_TOKEN", "slurm-test-secret-0123456789", 1);
    CHECK(strncmp(a, "slurm-", 6) == 0 && strlen(a) == 22 && strcmp(a, b) == 0 && strcmp(a, c) != 0 &&
          strcmp(a, d) != 0 && strstr(a, "4242") == NULL);
    setenv("DDL_JOB", "mine", 1);
    job_of(e, sizeof e);
    CHECK(strcmp(e, "mine") == 0);
    unsetenv("DDL_JOB");
    unsetenv("DDL_TOKEN");
    job_of(e, sizeof e);
    CHECK(e[0] == '\0');
    setenv("DDL_TOKEN", "slurm-test-secret-0123456789", 1);
}

int main(void)
{
    first_host("node[01-04,07],gpu5", "node01");
    first_host("gpu5,node[01-04]", "gpu5");
    first_host("rack[2-3]n[08,10]", "rack2n08");
    first_host("127.0.0.[1,2]", "127.0.0.1");
    first_host("single", "single");
    first_host("node[01-04", NULL);
    first_host("", NULL);
    first_host("a]b", NULL);

    CHECK(ddl__slurm_tasks_here("2(x3),1", 0) == 2 && ddl__slurm_tasks_here("2(x3),1", 2) == 2);
    CHECK(ddl__slurm_tasks_here("2(x3),1", 3) == 1 && ddl__slurm_tasks_here("2(x3),1", 4) == -1);
    CHECK(ddl__slurm_tasks_here("4", 0) == 4 && ddl__slurm_tasks_here("3,1", 1) == 1);
    CHECK(ddl__slurm_tasks_here("x", 0) == -1 && ddl__slurm_tasks_here("2(3)", 0) == -1);

    /* srun -N2 -n4: no DDL_ variable but the token */
    static const char *const ddl_vars[] = {"DDL_RANK", "DDL_WORLD_SIZE", "DDL_LOCAL_RANK", "DDL_LOCAL_SIZE",
                                           "DDL_MASTER", "DDL_PEERS", "DDL_TRANSPORT", "RANK", "WORLD_SIZE",
                                           "OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "SLURM_NTASKS_PER_NODE", NULL};
    for (int i = 0; ddl_vars[i]; i++)
        unsetenv(ddl_vars[i]);
    setenv("DDL_TOKEN", "slurm-test-secret-0123456789", 1);
    setenv("SLURM_NTASKS", "4", 1);
    setenv("SLURM_JOB_ID", "4242", 1);
    setenv("SLURM_STEP_ID", "1", 1);
    setenv("SLURM_STEP_NODELIST", "node[01-02]", 1);
    setenv("SLURM_JOB_NODELIST", "node[01-05]", 1);
    srun_task(0, 0, 0, "2(x2)", 2);
    srun_task(3, 1, 1, "2(x2)", 2);
    srun_task(1, 0, 1, "4", 4); /* one node: shm */
    job_ids();
    setenv("SLURM_STEP_NODELIST", "node[01", 1);
    ddl_comm_config cfg;
    char err[256];
    CHECK(ddl_comm_config_from_env(&cfg, &env, err, sizeof err) == DDL_EINVAL && strstr(err, "cannot read its first host"));
    return TEST_END();
}
