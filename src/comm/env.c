/* env.c - ddl_comm_config_from_env: where the comm reads the environment, and only when the
 * caller asks (the trainer's variables are src/train/env.c's). It turns DDL_* (and mpirun's, Slurm's and torchrun's) variables into a
 * ddl_comm_config (TensorFlow's TF_CONFIG through tfconfig.c); everything below it takes its
 * settings from config structs. */
#include "impl.h"

#include <stdlib.h>
#include <string.h>

static const char *env_str(const char *name)
{
    const char *v = getenv(name);
    return v && v[0] ? v : NULL;
}

/* choose_transport: DDL_TRANSPORT, else mpi under mpirun, else the default (comm.c). */
static int choose_transport(ddl_comm_config *cfg, char *err, size_t err_bytes)
{
    const char *name = env_str("DDL_TRANSPORT");
    if (name)
        return ddl__default_transport(cfg, name, "DDL_TRANSPORT", err, err_bytes);
    if (getenv("OMPI_COMM_WORLD_SIZE") || getenv("PMI_SIZE"))
        return ddl__default_transport(cfg, "mpi", "the default under mpirun", err, err_bytes);
    return ddl__default_transport(cfg, NULL, "", err, err_bytes);
}

/* env_flag: 1 if the first of names that is set is "1". */
static int env_flag(const char *const *names)
{
    for (; *names; names++) {
        const char *v = getenv(*names);
        if (v)
            return strcmp(v, "1") == 0;
    }
    return 0;
}

/* torchrun: its workers' RANK, WORLD_SIZE, ... are the ones to read when no DDL_ variable says
 * otherwise and torchrun started us (TORCHELASTIC_RUN_ID), even inside mpirun or Slurm (srun
 * torchrun: SLURM_PROCID is the node's task then, not the worker), or when they are the only
 * ones set (a launcher that follows torchrun's conventions). */
static int torchrun(void)
{
    if (getenv("DDL_RANK") || getenv("DDL_WORLD_SIZE") || !getenv("RANK") || !getenv("WORLD_SIZE"))
        return 0;
    return getenv("TORCHELASTIC_RUN_ID") || !(getenv("OMPI_COMM_WORLD_SIZE") || getenv("PMI_SIZE") ||
                                              getenv("SLURM_NTASKS"));
}

/* tf_config: TensorFlow's TF_CONFIG describes the job (tfconfig.c) when it is set and nothing
 * more explicit is: no DDL_RANK, DDL_WORLD_SIZE, DDL_PEERS or DDL_MASTER, and no rank of
 * mpirun's, Slurm's or torchrun's. */
static int tf_config(void)
{
    static const char *const wins[] = {"DDL_RANK", "DDL_WORLD_SIZE", "DDL_PEERS", "DDL_MASTER",
                                       "OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "SLURM_PROCID", NULL};
    for (int i = 0; wins[i]; i++)
        if (getenv(wins[i]))
            return 0;
    return env_str("TF_CONFIG") && !torchrun();
}

/* slurm_local_size: this node's tasks from SLURM_STEP_TASKS_PER_NODE (or SLURM_TASKS_PER_NODE)
 * and SLURM_NODEID, as Slurm always sets them; 1 if found. */
static int slurm_local_size(ddl_comm_config *cfg)
{
    const char *per = getenv("SLURM_STEP_TASKS_PER_NODE"), *node = getenv("SLURM_NODEID");
    if (!per)
        per = getenv("SLURM_TASKS_PER_NODE");
    int here = per && node ? ddl__slurm_tasks_here(per, atoi(node)) : -1;
    if (here < 1)
        return 0;
    cfg->local_size = here;
    return 1;
}

static int config_ints(ddl_comm_config *cfg, ddl_comm_env *env, char *err, size_t err_bytes)
{
    static const char *const rank_n[] = {"DDL_RANK", "OMPI_COMM_WORLD_RANK", "PMI_RANK", "SLURM_PROCID", NULL};
    static const char *const size_n[] = {"DDL_WORLD_SIZE", "OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "SLURM_NTASKS",
                                         NULL};
    static const char *const lrank_n[] = {"DDL_LOCAL_RANK", "OMPI_COMM_WORLD_LOCAL_RANK", "MPI_LOCALRANKID",
                                          "SLURM_LOCALID", NULL};
    static const char *const lsize_n[] = {"DDL_LOCAL_SIZE", "OMPI_COMM_WORLD_LOCAL_SIZE", "MPI_LOCALNRANKS",
                                          "SLURM_NTASKS_PER_NODE", NULL};
    static const char *const t_rank_n[] = {"RANK", NULL}, *const t_size_n[] = {"WORLD_SIZE", NULL};
    static const char *const t_lrank_n[] = {"DDL_LOCAL_RANK", "LOCAL_RANK", NULL};
    static const char *const t_lsize_n[] = {"DDL_LOCAL_SIZE", "LOCAL_WORLD_SIZE", NULL};
    static const char *const tmo_n[] = {"DDL_TIMEOUT_MS", NULL};
    int torch = torchrun(), tf = tf_config();
    int st, f_rank, f_size, f_lrank, f_lsize, f_tmo;
    if (tf && (st = ddl__tf_config(getenv("TF_CONFIG"), cfg, env, err, err_bytes)) != DDL_OK)
        return st; /* rank, world, peers and the local ones: DDL_LOCAL_RANK and _SIZE still win */
    if ((st = ddl__env_int(torch ? t_rank_n : rank_n, &cfg->rank, &f_rank, err, err_bytes)) ||
        (st = ddl__env_int(torch ? t_size_n : size_n, &cfg->world_size, &f_size, err, err_bytes)) ||
        (st = ddl__env_int(torch ? t_lrank_n : lrank_n, &cfg->local_rank, &f_lrank, err, err_bytes)) ||
        (st = ddl__env_int(torch ? t_lsize_n : lsize_n, &cfg->local_size, &f_lsize, err, err_bytes)) ||
        (st = ddl__env_int(tmo_n, &cfg->timeout_ms, &f_tmo, err, err_bytes)))
        return st;
    if (tf)
        f_rank = f_size = f_lrank = f_lsize = 1;
    if (!f_size)
        cfg->world_size = 1;
    if (!f_lsize && !torch && !getenv("DDL_RANK") && getenv("SLURM_PROCID"))
        f_lsize = slurm_local_size(cfg); /* srun without --ntasks-per-node */
    if (!f_lsize)
        cfg->local_size = cfg->world_size;
    if (!f_lrank)
        cfg->local_rank = cfg->local_size == cfg->world_size ? cfg->rank : 0;
    if (!f_tmo)
        cfg->timeout_ms = 60000;
    if (cfg->world_size < 1)
        return ddl__errf(err, err_bytes, DDL_EINVAL, "world size %d must be at least 1", cfg->world_size);
    if (cfg->rank < 0 || cfg->rank >= cfg->world_size)
        return ddl__errf(err, err_bytes, DDL_EINVAL, "rank %d is not in [0, %d) (world size %d)", cfg->rank,
                         cfg->world_size, cfg->world_size);
    if (cfg->local_size < 1 || cfg->local_size > cfg->world_size || cfg->local_rank < 0 ||
        cfg->local_rank >= cfg->local_size)
        return ddl__errf(err, err_bytes, DDL_EINVAL, "local rank %d of local size %d does not fit world size %d",
                         cfg->local_rank, cfg->local_size, cfg->world_size);
    if (cfg->timeout_ms <= 0)
        return ddl__errf(err, err_bytes, DDL_EINVAL, "DDL_TIMEOUT_MS=%d must be positive", cfg->timeout_ms);
    return DDL_OK;
}

/* torchrun_master: MASTER_ADDR and MASTER_PORT as the rendezvous (into env->master), and
 * torchrun's run id as the job id, where DDL_MASTER and DDL_JOB do not say. */
static int torchrun_master(ddl_comm_config *cfg, ddl_comm_env *env, char *err, size_t err_bytes)
{
    const char *addr = env_str("MASTER_ADDR"), *port = env_str("MASTER_PORT");
    const char *run = env_str("TORCHELASTIC_RUN_ID");
    if (!cfg->job && run && strcmp(run, "none") != 0) /* "none": torchrun's default, no id at all */
        cfg->job = run;
    if (cfg->master || cfg->peers || !addr || !port)
        return DDL_OK;
    int n = snprintf(env->master, sizeof env->master, strchr(addr, ':') ? "[%s]:%s" : "%s:%s", addr, port);
    if (n < 0 || (size_t)n >= sizeof env->master)
        return ddl__errf(err, err_bytes, DDL_EINVAL, "MASTER_ADDR=%s MASTER_PORT=%s: longer than %zu characters",
                         addr, port, sizeof env->master - 1);
    cfg->master = env->master;
    return DDL_OK;
}

/* heartbeat_ints: DDL_HEARTBEAT_TIMEOUT_MS (default 5000, 0: off) and DDL_HEARTBEAT_INTERVAL_MS
 * (default 1000, at most the timeout). */
static int heartbeat_ints(ddl_comm_config *cfg, char *err, size_t err_bytes)
{
    static const char *const tmo_n[] = {"DDL_HEARTBEAT_TIMEOUT_MS", NULL};
    static const char *const ivl_n[] = {"DDL_HEARTBEAT_INTERVAL_MS", NULL};
    int st, f_tmo, f_ivl;
    if ((st = ddl__env_int(tmo_n, &cfg->heartbeat_timeout_ms, &f_tmo, err, err_bytes)) ||
        (st = ddl__env_int(ivl_n, &cfg->heartbeat_interval_ms, &f_ivl, err, err_bytes)))
        return st;
    if (!f_tmo)
        cfg->heartbeat_timeout_ms = 5000;
    if (!f_ivl)
        cfg->heartbeat_interval_ms = cfg->heartbeat_timeout_ms >= 5000 ? 1000 : cfg->heartbeat_timeout_ms / 5 + 1;
    if (cfg->heartbeat_timeout_ms < 0)
        return ddl__errf(err, err_bytes, DDL_EINVAL, "DDL_HEARTBEAT_TIMEOUT_MS=%d must be 0 (off) or positive",
                         cfg->heartbeat_timeout_ms);
    if (cfg->heartbeat_timeout_ms > 0 &&
        (cfg->heartbeat_interval_ms <= 0 || cfg->heartbeat_interval_ms > cfg->heartbeat_timeout_ms))
        return ddl__errf(err, err_bytes, DDL_EINVAL, "DDL_HEARTBEAT_INTERVAL_MS=%d must be in [1, %d] "
                         "(DDL_HEARTBEAT_TIMEOUT_MS)", cfg->heartbeat_interval_ms, cfg->heartbeat_timeout_ms);
    return DDL_OK;
}

/* from_env: ddl_comm_config_from_env, with the text it builds in env. */
static int from_env(ddl_comm_config *cfg, ddl_comm_env *env, char *err, size_t err_bytes)
{
    int st = config_ints(cfg, env, err, err_bytes);
    if (st == DDL_OK)
        st = heartbeat_ints(cfg, err, err_bytes);
    if (st)
        return st;
    cfg->master = env_str("DDL_MASTER");
    if (!cfg->peers) /* TF_CONFIG's, or DDL_PEERS */
        cfg->peers = env_str("DDL_PEERS");
    cfg->job = env_str("DDL_JOB");
    if (torchrun() && (st = torchrun_master(cfg, env, err, err_bytes)) != DDL_OK)
        return st;
    if (!torchrun() && !cfg->master && !cfg->peers && !getenv("DDL_RANK") && getenv("SLURM_PROCID") &&
        cfg->world_size > 1 && (st = ddl__slurm_master(cfg, env, err, err_bytes)) != DDL_OK)
        return st;
    cfg->token = env_str("DDL_TOKEN");
    if (!torchrun() && getenv("SLURM_PROCID") && !getenv("DDL_RANK"))
        ddl__slurm_job(cfg, env);
    static const char *const native_n[] = {"DDL_NATIVE_ALLREDUCE", "DDL_MPI_NATIVE", NULL};
    cfg->native_allreduce = env_flag(native_n);
    static const char *const insecure_n[] = {"DDL_INSECURE", NULL};
    cfg->insecure = env_flag(insecure_n);
    static const char *const mac_n[] = {"DDL_MAC", NULL};
    cfg->mac = env_flag(mac_n);
    const char *al = env_str("DDL_ALGO");
    if (al && strcmp(al, "ring") == 0)
        cfg->algo = DDL_ALGO_RING;
    else if (al && strcmp(al, "ps") == 0)
        cfg->algo = DDL_ALGO_PS;
    else if (al && strcmp(al, "hier") == 0)
        cfg->algo = DDL_ALGO_HIER;
    else if (al && al[0] && strcmp(al, "auto") != 0)
        return ddl__errf(err, err_bytes, DDL_EINVAL, "DDL_ALGO=%s: expected ring, ps, hier or auto", al);
    const char *el = env_str("DDL_ELASTIC");
    if (el && el[0]) {
        char tail = 0;
        int k = sscanf(el, "%d:%d%c", &cfg->elastic_min, &cfg->elastic_max, &tail);
        if (k == 1 && sscanf(el, "%d%c", &cfg->elastic_min, &tail) == 1)
            cfg->elastic_max = 0;
        else if (k != 2)
            return ddl__errf(err, err_bytes, DDL_EINVAL, "DDL_ELASTIC=%s: expected MIN:MAX (or MIN), e.g. 2:4", el);
        if (cfg->elastic_min < 1 || (cfg->elastic_max && cfg->elastic_max < cfg->elastic_min))
            return ddl__errf(err, err_bytes, DDL_EINVAL, "DDL_ELASTIC=%s: need 1 <= MIN <= MAX", el);
    }
    const char *jn = env_str("DDL_JOIN");
    cfg->join = jn && strcmp(jn, "1") == 0;
    const char *z = env_str("DDL_COMPRESS");
    if (z && strcmp(z, "bf16") == 0)
        cfg->compress = DDL_COMPRESS_BF16;
    else if (z && strcmp(z, "fp16") == 0)
        cfg->compress = DDL_COMPRESS_FP16;
    else if (z && z[0] && strcmp(z, "none") != 0)
        return ddl__errf(err, err_bytes, DDL_EINVAL, "DDL_COMPRESS=%s: expected none, bf16 or fp16", z);
    if (cfg->world_size == 1 && !env_str("DDL_TRANSPORT"))
        return DDL_OK; /* one process: no transport needed */
    return choose_transport(cfg, err, err_bytes);
}

int ddl_comm_config_from_env(ddl_comm_config *cfg, ddl_comm_env *env, char *err, size_t err_bytes)
{
    if (!cfg)
        return ddl__errf(err, err_bytes, DDL_EINVAL, "cfg is NULL");
    memset(cfg, 0, sizeof *cfg);
    ddl__errf(err, err_bytes, DDL_OK, "%s", "");
    ddl_comm_env scratch; /* without the caller's env, only to find out whether one was needed */
    ddl_comm_env *e = env ? env : &scratch;
    memset(e, 0, sizeof *e);
    int st = from_env(cfg, e, err, err_bytes);
    if (st != DDL_OK || env)
        return st;
    const char *needs = cfg->master == scratch.master ? "the master from torchrun's MASTER_ADDR and MASTER_PORT "
                                                        "or from Slurm's node list"
                        : cfg->peers == scratch.peers ? "the peers from TF_CONFIG"
                        : cfg->job == scratch.job     ? "the job id from Slurm's job and step ids"
                                                      : NULL;
    if (!needs)
        return DDL_OK;
    memset(cfg, 0, sizeof *cfg);
    return ddl__errf(err, err_bytes, DDL_EINVAL, "ddl_comm_config_from_env: %s is text built from the environment, "
                     "kept in a ddl_comm_env: pass one (env is NULL)", needs);
}
