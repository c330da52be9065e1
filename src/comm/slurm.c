/* slurm.c - where a Slurm step's rank 0 listens, from Slurm's own variables, so that `srun`
 * needs no DDL_MASTER: the first host of SLURM_STEP_NODELIST (else SLURM_JOB_NODELIST), in
 * Slurm's hostlist syntax ("node[01-04,07],gpu5": the first is node01), and a port every task of
 * the step derives alike from the job and step ids; and, with a token and no DDL_JOB, a job id
 * of the step that nobody without the token can know in advance (so two jobs of one user on a
 * node do not meet in one shared-memory segment, and no other user can take its name first).
 * Only for ddl_comm_config_from_env (env.c), which calls them when DDL_MASTER and DDL_PEERS
 * (ddl__slurm_master) or DDL_JOB (ddl__slurm_job) are unset. */
#include "impl.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define SLURM_PORT_BASE 29500 /* torchrun's and Horovod's customary port ... */
#define SLURM_PORT_SPAN 2000  /* ... and the next 1999: one per job and step */

int ddl__slurm_first_host(const char *list, char *out, size_t out_bytes)
{
    size_t n = 0;
    int depth = 0;
    for (const char *p = list; *p && !(depth == 0 && *p == ','); p++) {
        if (*p == '[') {
            depth++;
            p++; /* the first value of the first range: up to '-', ',' or ']' */
            while (*p && *p != '-' && *p != ',' && *p != ']' && n + 1 < out_bytes)
                out[n++] = *p++;
            while (*p && *p != ']')
                p++;
            if (!*p)
                return -1;
            depth--;
            continue;
        }
        if (*p == ']' || n + 1 >= out_bytes)
            return -1;
        out[n++] = *p;
    }
    out[n] = '\0';
    return n ? 0 : -1;
}

int ddl__slurm_master(ddl_comm_config *cfg, ddl_comm_env *env, char *err, size_t err_bytes)
{
    const char *list = getenv("SLURM_STEP_NODELIST");
    if (!list || !list[0])
        list = getenv("SLURM_JOB_NODELIST");
    const char *job = getenv("SLURM_JOB_ID"), *step = getenv("SLURM_STEP_ID");
    if (!list || !list[0] || !job || !job[0])
        return DDL_OK;
    char host[256];
    if (ddl__slurm_first_host(list, host, sizeof host) != 0)
        return ddl__errf(err, err_bytes, DDL_EINVAL, "SLURM_JOB_NODELIST=%.200s: cannot read its first host", list);
    unsigned long j = strtoul(job, NULL, 10), s = step ? strtoul(step, NULL, 10) : 0;
    int port = SLURM_PORT_BASE + (int)((j * 7 + s) % SLURM_PORT_SPAN);
    snprintf(env->master, sizeof env->master, "%s:%d", host, port);
    cfg->master = env->master;
    return DDL_OK;
}

void ddl__slurm_job(ddl_comm_config *cfg, ddl_comm_env *env)
{
    const char *job = getenv("SLURM_JOB_ID"), *step = getenv("SLURM_STEP_ID");
    if (cfg->job || !cfg->token || !cfg->token[0] || !job || !job[0])
        return;
    char id[96];
    unsigned char mac[32];
    int n = snprintf(id, sizeof id, "slurm-%.40s.%.40s", job, step ? step : "batch");
    ddl_hmac_sha256(cfg->token, strlen(cfg->token), id, (size_t)n, mac);
    int at = snprintf(env->job, sizeof env->job, "slurm-");
    for (int i = 0; i < 8; i++)
        at += snprintf(env->job + at, sizeof env->job - (size_t)at, "%02x", mac[i]);
    cfg->job = env->job;
}

int ddl__slurm_tasks_here(const char *per_node, int node)
{
    /* "2(x3),1": three nodes of 2 tasks, then one of 1 */
    const char *p = per_node;
    while (p && *p) {
        char *end;
        long tasks = strtol(p, &end, 10), times = 1;
        if (end == p || tasks < 1)
            return -1;
        p = end;
        if (*p == '(') {
            if (p[1] != 'x')
                return -1;
            times = strtol(p + 2, &end, 10);
            if (end == p + 2 || *end != ')' || times < 1)
                return -1;
            p = end + 1;
        }
        if (node < times)
            return (int)tasks;
        node -= (int)times;
        if (*p == ',')
            p++;
        else if (*p)
            return -1;
    }
    return -1;
}
