/* example_common.h - what lenet.c and unet.c share, and nothing else: the training flags (their
 * option table, --help lines and values), the ddl_train_config they make, what a resumed run
 * says, a clock, one test hook, and the start of a run (joining the job, starting the trainer).
 * What a signal does, from the start of main on, is example_signal.h's.
 * Their epoch loop is example_loop.h's. What they show of a run (progress, event files, timeline,
 * stragglers) is example_watch.h's, included at the end. Header-only, as every file of
 * common/: copy the folder along with the example. */
#ifndef DDL_EXAMPLE_COMMON_H
#define DDL_EXAMPLE_COMMON_H

#include "ddl.h"

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "example_cli.h"
#include "example_signal.h"

static void example_log(void *ud, int level, const char *msg);

typedef struct example_opts {
    const char *data;
    int epochs, batch, threads, micro_batches, quiet, optimizer, schedule, warmup;
    int accumulate; /* --accumulate N: each rank's part of the batch as N shards (0: none) */
    long seed, train_limit;
    float lr, momentum, weight_decay;
    const char *checkpoint, *save; /* checkpoints: --checkpoint PATH --checkpoint-every N --resume --save PATH */
    long checkpoint_every, save_rate;
    int resume, keep_checkpoints; /* --keep-checkpoints K: PATH and PATH.1 .. PATH.K-1 (default 1: PATH) */
    const char *logdir; /* --logdir DIR: TensorBoard event files, with scalars every --log-every steps */
    int log_every;
    int profile; /* --profile: rank 0 prints where its steps' time went, layer by layer */
    int precision; /* --precision fp32|bf16: DDL_PRECISION_* */
    int conv_algo; /* --conv direct|winograd, or DDL_CONV=winograd: ddl_model_config.conv_algo */
} example_opts;

/* getopt_long's codes of the shared flags; an example's own flags take codes from EXAMPLE_OPT_END. */
enum { OPT_DATA = 256, OPT_EPOCHS, OPT_BATCH, OPT_LR, OPT_MOMENTUM, OPT_OPTIMIZER, OPT_WEIGHT_DECAY, OPT_SCHEDULE,
       OPT_WARMUP, OPT_SEED, OPT_TRAIN_LIMIT, OPT_THREADS, OPT_QUIET, OPT_CHECKPOINT, OPT_CHECKPOINT_EVERY, OPT_RESUME,
       OPT_SAVE, OPT_SAVE_RATE, OPT_LOGDIR, OPT_LOG_EVERY, OPT_MICRO_BATCHES, OPT_KEEP_CHECKPOINTS, OPT_ACCUMULATE,
       OPT_PROFILE, OPT_PRECISION, OPT_CONV, EXAMPLE_OPT_END };

#define EXAMPLE_OPTIONS                                                                                         \
    {"data", required_argument, NULL, OPT_DATA}, {"epochs", required_argument, NULL, OPT_EPOCHS},               \
    {"batch", required_argument, NULL, OPT_BATCH}, {"lr", required_argument, NULL, OPT_LR},                     \
    {"momentum", required_argument, NULL, OPT_MOMENTUM}, {"optimizer", required_argument, NULL, OPT_OPTIMIZER}, \
    {"weight-decay", required_argument, NULL, OPT_WEIGHT_DECAY},                                                \
    {"schedule", required_argument, NULL, OPT_SCHEDULE}, {"warmup", required_argument, NULL, OPT_WARMUP},       \
    {"seed", required_argument, NULL, OPT_SEED}, {"train-limit", required_argument, NULL, OPT_TRAIN_LIMIT},     \
    {"threads", required_argument, NULL, OPT_THREADS}, {"quiet", no_argument, NULL, OPT_QUIET},                 \
    {"checkpoint", required_argument, NULL, OPT_CHECKPOINT},                                                    \
    {"checkpoint-every", required_argument, NULL, OPT_CHECKPOINT_EVERY},                                        \
    {"keep-checkpoints", required_argument, NULL, OPT_KEEP_CHECKPOINTS},                                        \
    {"resume", no_argument, NULL, OPT_RESUME}, {"save", required_argument, NULL, OPT_SAVE},                     \
    {"save-rate", required_argument, NULL, OPT_SAVE_RATE}, {"logdir", required_argument, NULL, OPT_LOGDIR},   \
    {"log-every", required_argument, NULL, OPT_LOG_EVERY},                                                      \
    {"micro-batches", required_argument, NULL, OPT_MICRO_BATCHES},                                              \
    {"accumulate", required_argument, NULL, OPT_ACCUMULATE}, {"profile", no_argument, NULL, OPT_PROFILE},     \
    {"precision", required_argument, NULL, OPT_PRECISION}, {"conv", required_argument, NULL, OPT_CONV},       \
    CLI_HELP_VERSION

/* --help lines of the shared flags: an example prints its own flags between the two parts. */
#define EXAMPLE_USAGE_TRAINING                                                                          \
    "  --data DIR                Fashion-MNIST IDX files (default /usr/share/datasets/fashion-mnist)\n" \
    "  --epochs N                passes over the training set\n"                                        \
    "  --batch B                 global batch: each of R ranks takes B/R of it\n"                       \
    "  --optimizer sgd|adam      with --lr X, --momentum M (SGD, default 0.9), --weight-decay W\n"      \
    "  --schedule constant|step|cosine   learning rate over the run, after --warmup STEPS\n"            \
    "  --seed S                  weights, shuffling and dropout (default 42)\n"                         \
    "  --train-limit N           train on the first N samples only\n"                                   \
    "  --threads N               threads per rank for ddl's kernels (default 1)\n"                                   \
    "  --micro-batches N         each rank's batch in N parts, side by side on the threads (0: auto)\n" \
    "  --accumulate N            N shards a rank, added in one order (1 rank, N 4: 4 ranks' bits)\n" \
    "  --precision fp32|bf16     bf16: conv and dense products on bfloat16 inputs, float32 sums\n"  \
    "                            and weights (a CPU with AVX512-BF16 or AMX; default fp32)\n"        \
    "  --conv direct|winograd    3x3 convolutions direct (default) or by Winograd where faster\n"     \
    "                            (other float32 bits; env DDL_CONV=winograd does the same)\n"         \
    "  --quiet                   no progress lines: only the summary\n"                               \
    "  --logdir DIR              TensorBoard event files in DIR (tensorboard --logdir DIR)\n"          \
    "  --log-every N             with --logdir: step scalars every N steps (default 10)\n"          \
    "  --profile                 at the end, rank 0's time per layer (ms, GFLOP/s, % of the\n"      \
    "                            core's peak) and its steps' split: data, compute, all-reduce\n"
#define EXAMPLE_USAGE_CHECKPOINTS                                                                        \
    "checkpoints:\n"                                                                                     \
    "  --checkpoint PATH         save to PATH at every epoch's end and every --checkpoint-every STEPS\n" \
    "  --keep-checkpoints K      keep the last K: PATH the newest, then PATH.1 .. PATH.K-1 (default 1)\n" \
    "  --resume                  continue from --checkpoint PATH when it exists\n"                       \
    "  --save PATH               save the final model to PATH\n"                                         \
    "  --save-rate BYTES_PER_SEC write checkpoints no faster than this\n"                                \
    "  (missing directories of these and --logdir are made, mode 0755)\n"                             \
    "  --help, --version         this text; the version\n"

static void example_defaults(example_opts *o)
{
    memset(o, 0, sizeof *o);
    o->data = "/usr/share/datasets/fashion-mnist";
    o->threads = 1;
    o->seed = 42;
    o->momentum = 0.9f;
    o->log_every = 10;
    o->keep_checkpoints = 1;
    const char *conv = getenv("DDL_CONV");
    o->conv_algo = conv && strcmp(conv, "winograd") == 0 ? DDL_CONV_WINOGRAD : DDL_CONV_DIRECT;
}

/* example_option: one shared flag c (from getopt_long) with its value arg; --help prints usage.
 * Anything else is a flag this example does not take: getopt_long has said which; exit 2. */
static void example_option(example_opts *o, int c, const char *arg, const char *usage)
{
    static const char *const optimizers[] = {"sgd", "adam", NULL};          /* DDL_OPTIM_* order */
    static const char *const schedules[] = {"constant", "step", "cosine", NULL}; /* DDL_SCHED_* order */
    static const char *const precisions[] = {"fp32", "bf16", NULL};              /* DDL_PRECISION_* order */
    switch (c) {
    case 'h': cli_help(usage); break;
    case 'V': cli_version(); break;
    case OPT_DATA: o->data = arg; break;
    case OPT_EPOCHS: o->epochs = cli_int("--epochs", arg, 0, 100000); break;
    case OPT_BATCH: o->batch = cli_int("--batch", arg, 1, 1 << 20); break;
    case OPT_LR: o->lr = cli_float("--lr", arg, 0, 100); break;
    case OPT_MOMENTUM: o->momentum = cli_float("--momentum", arg, 0, 0.9999); break;
    case OPT_OPTIMIZER: o->optimizer = cli_word("--optimizer", arg, optimizers); break;
    case OPT_WEIGHT_DECAY: o->weight_decay = cli_float("--weight-decay", arg, 0, 1); break;
    case OPT_SCHEDULE: o->schedule = cli_word("--schedule", arg, schedules); break;
    case OPT_WARMUP: o->warmup = cli_int("--warmup", arg, 0, 1000000000); break;
    case OPT_SEED: o->seed = cli_long("--seed", arg, 0, 4294967295L); break;
    case OPT_TRAIN_LIMIT: o->train_limit = cli_long("--train-limit", arg, 0, 1000000000000L); break;
    case OPT_THREADS: o->threads = cli_int("--threads", arg, 1, 256); break;
    case OPT_CONV: {
        static const char *const algos[] = {"direct", "winograd", NULL}; /* DDL_CONV_* order */
        o->conv_algo = cli_word("--conv", arg, algos);
        break;
    }
    case OPT_MICRO_BATCHES: o->micro_batches = cli_int("--micro-batches", arg, 0, DDL_MAX_MICRO_BATCHES); break;
    case OPT_ACCUMULATE: o->accumulate = cli_int("--accumulate", arg, 1, DDL_MAX_MICRO_BATCHES); break;
    case OPT_QUIET: o->quiet = 1; break;
    case OPT_PRECISION: o->precision = cli_word("--precision", arg, precisions); break;
    case OPT_CHECKPOINT: o->checkpoint = arg; break;
    case OPT_CHECKPOINT_EVERY: o->checkpoint_every = cli_long("--checkpoint-every", arg, 0, 1000000000000L); break;
    case OPT_KEEP_CHECKPOINTS: o->keep_checkpoints = cli_int("--keep-checkpoints", arg, 1, 1000); break;
    case OPT_RESUME: o->resume = 1; break;
    case OPT_SAVE: o->save = arg; break;
    case OPT_SAVE_RATE: o->save_rate = cli_long("--save-rate", arg, 0, 1000000000000000L); break;
    case OPT_LOGDIR: o->logdir = arg; break;
    case OPT_LOG_EVERY: o->log_every = cli_int("--log-every", arg, 1, 1000000000); break;
    case OPT_PROFILE: o->profile = 1; break;
    default: cli_try(); /* getopt_long named the flag */
    }
}

/* ---- output paths: made and checked before the first step, so that a bad one fails in the
 * first second, naming it, and not after hours of training with the model lost ---- */

/* example_mkdirs: dir and every missing directory above it, mode 0755 (as Keras, Lightning and
 * TensorBoard's SummaryWriter make them). 0, or -1 with why. */
static int example_mkdirs(const char *dir, char *why, size_t why_bytes)
{
    char d[4096];
    struct stat st;
    if (snprintf(d, sizeof d, "%s", dir) >= (int)sizeof d)
        return snprintf(why, why_bytes, "too long a path"), -1;
    for (char *p = d + 1;; p++) { /* each prefix ending before a '/', then the whole */
        int end = *p == 0;
        if (*p != '/' && !end)
            continue;
        *p = 0;
        if (mkdir(d, 0755) != 0 && errno != EEXIST)
            return snprintf(why, why_bytes, "cannot create directory %.300s: %s", d, strerror(errno)), -1;
        if (stat(d, &st) != 0 || !S_ISDIR(st.st_mode))
            return snprintf(why, why_bytes, "%.300s is not a directory", d), -1;
        if (end)
            break;
        *p = '/';
    }
    if (access(d, W_OK | X_OK) != 0)
        return snprintf(why, why_bytes, "cannot write in directory %.300s: %s", d, strerror(errno)), -1;
    return 0;
}

/* example_output_file: path's directory made (example_mkdirs) and writable (a save writes a
 * temporary file there and renames it); path itself not a directory. 0, or -1 with why. */
static int example_output_file(const char *path, char *why, size_t why_bytes)
{
    char dir[4096];
    struct stat st;
    const char *slash = strrchr(path, '/');
    if (!*path || (slash && !slash[1]))
        return snprintf(why, why_bytes, "expected a file name"), -1;
    snprintf(dir, sizeof dir, "%.*s", slash ? (slash == path ? 1 : (int)(slash - path)) : 1, slash ? path : ".");
    if (example_mkdirs(dir, why, why_bytes) != 0)
        return -1;
    if (stat(path, &st) == 0 && S_ISDIR(st.st_mode))
        return snprintf(why, why_bytes, "a directory, not a file"), -1;
    return 0;
}

/* example_outputs_prepare: on the rank that writes them (rank 0, as the environment says), the
 * directories of --checkpoint, --save and --logdir made and checked; a bad one exits 2, naming
 * it. The other ranks write nothing, and their file systems may not have these paths. */
static void example_outputs_prepare(const example_opts *o)
{
    ddl_comm_config cc;
    ddl_comm_env env;
    char why[512], msg[4600];
    if (ddl_comm_config_from_env(&cc, &env, why, sizeof why) == DDL_OK && cc.rank != 0)
        return;
    const char *flag = NULL, *path = NULL;
    if (o->checkpoint && example_output_file(o->checkpoint, why, sizeof why) != 0)
        flag = "--checkpoint", path = o->checkpoint;
    else if (o->save && example_output_file(o->save, why, sizeof why) != 0)
        flag = "--save", path = o->save;
    else if (o->logdir && example_mkdirs(o->logdir, why, sizeof why) != 0)
        flag = "--logdir", path = o->logdir;
    if (flag) {
        snprintf(msg, sizeof msg, "%s %s: %s", flag, path, why);
        cli_error(msg);
    }
}

/* example_options_done: after getopt_long: no operands, what --resume needs, and the output
 * paths made and checked. */
static void example_options_done(const example_opts *o, int argc, char **argv)
{
    cli_end(argc, argv, optind);
    if ((o->resume || o->checkpoint_every) && !o->checkpoint)
        cli_error("--resume and --checkpoint-every need --checkpoint PATH");
    if (o->keep_checkpoints > 1 && !o->checkpoint)
        cli_error("--keep-checkpoints needs --checkpoint PATH");
    example_outputs_prepare(o);
}

/* example_shards: ddl_train_config.shards for the flags: --accumulate N shards per rank of the
 * most ranks the job will have (an elastic comm's maximum, else its world); 0 (the trainer's
 * default) without. */
static int example_shards(const example_opts *o, const ddl_comm *comm)
{
    int most = ddl_comm_elastic_max(comm) > 0 ? ddl_comm_elastic_max(comm) : ddl_comm_size(comm);
    return o->accumulate ? o->accumulate * most : 0;
}

/* example_train_config: the trainer's configuration from the environment (DDL_OVERLAP,
 * DDL_BUCKET_KB: a bad value exits 2, naming it) and the flags, for n training samples. */
static void example_train_config(const example_opts *o, ddl_comm *comm, long n, ddl_train_config *tc)
{
    char why[DDL_ERR_BYTES];
    ddl_train_config_default(tc);
    if (ddl_train_config_from_env(tc, why, sizeof why) != DDL_OK)
        cli_error(why);
    tc->comm = comm;
    tc->epochs = o->epochs;
    tc->batch = o->batch;
    tc->seed = (uint64_t)o->seed;
    tc->conv_algo = o->conv_algo;
    tc->train_limit = o->train_limit;
    tc->micro_batches = o->micro_batches;
    tc->precision = o->precision;
    tc->shards = example_shards(o, comm);
    tc->save_bytes_per_sec = o->save_rate;
    tc->stop_checkpoint = o->checkpoint; /* elastic: written by the last survivors when too few live */
    tc->optim.kind = o->optimizer;
    tc->optim.lr = o->lr;
    tc->optim.momentum = o->momentum;
    tc->optim.weight_decay = o->weight_decay;
    long steps_per_epoch = ((o->train_limit > 0 && o->train_limit < n ? o->train_limit : n) + o->batch - 1) / o->batch;
    tc->schedule.kind = o->schedule;
    tc->schedule.warmup_steps = o->warmup;
    tc->schedule.total_steps = steps_per_epoch * o->epochs;                         /* cosine */
    tc->schedule.step_size = steps_per_epoch * (o->epochs > 3 ? o->epochs / 3 : 1); /* step: x0.1, 3 times */
    tc->schedule.gamma = 0.1f;
    tc->log = example_log; /* example_watch.h: DDL_LOG_LEVEL */
    tc->log_ud = (void *)(uintptr_t)cli_prog;
}

/* example_say_resumed: rank 0 tells where a --resume run goes on (saved_world 0: from scratch). */
static void example_say_resumed(const example_opts *o, ddl_trainer *tr, int saved_world, int world)
{
    if (!saved_world)
        printf("no checkpoint at %s: starting from scratch\n", o->checkpoint);
    else
        printf("resumed from %s at step %ld (epoch %d%s)\n", o->checkpoint, ddl_trainer_step_count(tr),
               ddl_trainer_epoch_index(tr) + 1, ddl_trainer_epoch_done(tr) ? ", finished" : "");
    if (saved_world && saved_world != world)
        printf("world size changed: the checkpoint was written by %d rank%s, resuming on %d; the rest of the "
               "epoch is re-sharded\n", saved_world, saved_world == 1 ? "" : "s", world);
    fflush(stdout);
}

/* example_seconds: a monotonic clock, for wall_s. */
static double example_seconds(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* example_test_stop: a test hook, not for users (tests/test_resume.sh): with DDL_TEST_STOP_AFTER=N
 * in the environment, the process kills itself (SIGKILL, as a crash) once step N, and its
 * checkpoint if one was due, are done (a background write too: ddl_trainer_save_wait, which
 * every rank reaches at that step). Without it, nothing. */
static void example_test_stop(ddl_trainer *tr, long step)
{
    const char *after = getenv("DDL_TEST_STOP_AFTER");
    if (after && atol(after) > 0 && step >= atol(after)) {
        ddl_trainer_save_wait(tr);
        fflush(stdout);
        raise(SIGKILL);
    }
    /* DDL_TEST_FAIL=RANK:STEP:kill|stop (tests/test_elastic.sh): the rank started as RANK kills or
     * stops itself once step STEP is done */
    const char *f = getenv("DDL_TEST_FAIL"), *r = getenv("DDL_RANK");
    int rank, at;
    char how[8] = "";
    if (f && r && sscanf(f, "%d:%d:%7s", &rank, &at, how) == 3 && rank == atoi(r) && step == at) {
        fflush(stdout);
        raise(strcmp(how, "stop") == 0 ? SIGSTOP : SIGKILL);
    }
}

#include "example_watch.h"

/* ---- the start of a run (here, after example_watch.h, whose log and watcher they use; static
 * inline: ddl-train, which includes this file too, starts its own way) ---- */

/* example_join: the comm of the job the environment describes (ddlrun, mpirun or Slurm), into cc
 * and *comm; alone (one rank) no comm: *comm stays NULL. cc and env are the caller's and must
 * live as long as the comm (cc's strings may point into env). Returns 0 to go on, or the exit
 * status: 2 for a bad DDL_LOG_LEVEL, 1 when the job cannot be joined (said on stderr, naming
 * prog and the rank). */
static inline int example_join(const char *prog, ddl_comm_config *cc, ddl_comm_env *env, ddl_comm **comm)
{
    char err[DDL_ERR_BYTES];
    int rc = ddl_comm_config_from_env(cc, env, err, sizeof err);
    if (rc == DDL_OK && example_log_setup(cc, prog) != 0) /* DDL_LOG_LEVEL */
        return 2;
    if (rc == DDL_OK && cc->world_size > 1)
        rc = ddl_comm_create(cc, NULL, comm, err, sizeof err);
    if (rc != DDL_OK) {
        fprintf(stderr, "%s: rank %d: cannot join the job: %s\n", prog, cc->rank, err);
        return 1;
    }
    return 0;
}

/* example_trainer_start: the watcher (example_watch_init, which adds the timeline to tc), the
 * trainer of model on train with tc (example_train_config's, and the example's own settings),
 * with --resume the checkpoint to go on from (rank 0 says where it goes on), the signals'
 * training behaviour, and the start-up line. DDL_OK, or a code: ddl_trainer_error(*tr) says why once *tr exists, else err. */
static inline int example_trainer_start(example_watch *w, const example_opts *o, const char *prog, ddl_comm *comm,
                                        ddl_train_config *tc, ddl_model *model, const ddl_dataset *train,
                                        ddl_trainer **tr, char err[DDL_ERR_BYTES])
{
    ddl_comm_joined(comm, NULL); /* a replacement, its data loaded, asks the running job in: its rank */
    int rank = comm ? ddl_comm_rank(comm) : 0, world = comm ? ddl_comm_size(comm) : 1;
    int rc = example_watch_init(w, o, prog, rank, world, train->n, tc, err);
    w->comm = comm;
    if (rc == DDL_OK)
        rc = ddl_trainer_create(tc, model, train, NULL, tr, err, DDL_ERR_BYTES);
    int saved_world = 0;
    if (rc == DDL_OK && o->resume)
        rc = ddl_trainer_resume(*tr, o->checkpoint, DDL_RESUME_IF_EXISTS, &saved_world);
    if (rc == DDL_OK && o->resume && rank == 0)
        example_say_resumed(o, *tr, saved_world, world);
    if (rc == DDL_OK) /* from here on SIGUSR1 asks for a checkpoint (with --checkpoint), SIGTERM and
                       * SIGINT end the run saying which checkpoint exists (example_signal.h) */
        example_signal_training(*tr, rank, o->checkpoint);
    if (rc == DDL_OK) /* the start-up line, after an all-reduce probe */
        rc = example_watch_start(w, comm, model, *tr);
    return rc;
}

#endif
