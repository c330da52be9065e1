/*
 * ddl.h - data-parallel distributed training of neural networks, in C.
 *
 * This is the one public header of ddl: users and plugin authors read only this file.
 * What is not declared here is not API. It reads top down as a user meets ddl: the example,
 * the conventions every call keeps, training and data, models, communication, checkpoints,
 * then the plugin interfaces and the low-level compute core.
 *
 * ---- overview ----
 * Each process (a rank) holds a full copy of a model, trains on its own slice of every
 * batch, and all ranks average their gradients with an all-reduce before every optimizer
 * step, so every replica stays identical. Transports (shm, tcp, zmq, mpi) and models
 * (lenet, unet, or your own) are plugins: const tables of function pointers, picked at run
 * time. Scope: CPU, float32 (inputs uint8 images), softmax cross-entropy with optional soft
 * dice, SGD with momentum or Adam with constant, step or cosine schedules, Linux.
 *
 * ---- example: train LeNet on Fashion-MNIST on as many ranks as ddlrun starts ----
 * (README.md has it as a whole program; tests/test_readme.sh compiles and runs that copy.)
 *
 *     char err[DDL_ERR_BYTES];
 *     ddl_comm_config cc;
 *     ddl_comm *comm = NULL;                                // NULL: one process
 *     if (ddl_comm_config_from_env(&cc, err, sizeof err) != DDL_OK ||
 *         (cc.world_size > 1 && ddl_comm_create(&cc, NULL, &comm, err, sizeof err) != DDL_OK))
 *         goto fail;                                        // err says why
 *     int world = comm ? ddl_comm_size(comm) : 1;
 *     ddl_dataset train = {0}, test = {0};
 *     ddl_model *model = NULL;
 *     ddl_trainer *tr = NULL;
 *     ddl_model_config mc = {.batch = (64 + world - 1) / world, .in_c = 1, .in_h = 28, .in_w = 28,
 *                            .n_classes = 10};              // this rank's part of a batch of 64
 *     ddl_train_config tc;
 *     ddl_train_config_default(&tc);                        // SGD lr 0.01 momentum 0.9, batch 64
 *     tc.comm = comm;
 *     if (ddl_dataset_load_mnist(DIR, "train", NULL, &train, err, sizeof err) != DDL_OK ||
 *         ddl_dataset_load_mnist(DIR, "t10k", NULL, &test, err, sizeof err) != DDL_OK ||
 *         ddl_model_create(ddl_model_lenet(), &mc, NULL, &model, err, sizeof err) != DDL_OK ||
 *         ddl_trainer_create(&tc, model, &train, NULL, &tr, err, sizeof err) != DDL_OK)
 *         goto fail;
 *     for (int e = 0; e < 5; e++) {
 *         ddl_epoch_stats es;
 *         ddl_eval_stats ev;
 *         if (ddl_trainer_epoch(tr, &es) != DDL_OK || ddl_trainer_evaluate(tr, &test, &ev) != DDL_OK)
 *             break;                                        // ddl_trainer_error(tr) says why
 *         printf("epoch %d loss %.4f acc %.4f\n", e + 1, es.loss, ev.accuracy);
 *     }
 *     ddl_trainer_destroy(tr); ddl_model_destroy(model);
 *     ddl_dataset_free(&train); ddl_dataset_free(&test); ddl_comm_destroy(comm);
 *
 * ---- conventions ----
 * Status: every fallible call returns int: DDL_OK (0) or a negative DDL_E* code.
 * Reasons: a call that creates an object or reads a file takes `char *err, size_t err_bytes`
 *   (err may be NULL) and writes there what was wrong, naming the value, file, rank or peer;
 *   on failure its out-parameter is set to NULL and nothing needs freeing. Later failures of an
 *   object are kept on it: ddl_comm_error(), ddl_trainer_error().
 * Memory: a NULL `const ddl_allocator *` means malloc/free. Memory ddl is given, from an
 *   allocator or as caller memory for an _init function, needs no more alignment than malloc's
 *   16 bytes; ddl aligns what it carves to DDL_ALIGN itself, and _sizeof sizes include the
 *   slack. Everything is allocated when objects are created; nothing allocates per training
 *   step. (OpenBLAS, when used, allocates its own thread buffers once, at its first call.)
 *   Without an allocator, blocks of 4 MiB or more ask Linux for transparent huge pages.
 * Threads: no object is safe to use from two threads at once; different objects may be used
 *   from different threads concurrently. ddl starts only the threads the caller asks for: the
 *   workers of ddl_set_threads(), a comm's heartbeat thread (heartbeat_timeout_ms > 0) and
 *   a trainer's all-reduce thread (overlap 1 or 2), each joined when its object is destroyed.
 * Environment: only ddl_comm_config_from_env() reads it; everything else takes config structs.
 */
#ifndef DDL_H
#define DDL_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* ---- version ---- */

#define DDL_VERSION_MAJOR 0
#define DDL_VERSION_MINOR 2
#define DDL_VERSION_PATCH 0
#define DDL_VERSION_NUMBER (DDL_VERSION_MAJOR * 10000 + DDL_VERSION_MINOR * 100 + DDL_VERSION_PATCH)

/* ddl_version_number: the library's DDL_VERSION_NUMBER, to compare with the header's. */
int ddl_version_number(void);
/* ddl_version_string: "MAJOR.MINOR.PATCH", static storage. */
const char *ddl_version_string(void);

/* ---- status codes and errors ----
 * Values are only ever appended. */
enum {
    DDL_OK = 0,
    DDL_ENOMEM = -1,     /* an allocation failed, or caller memory is too small */
    DDL_EINVAL = -2,     /* an argument or a configuration value is out of range */
    DDL_EIO = -3,        /* the operating system refused a file or socket operation */
    DDL_ECORRUPT = -4,   /* a file or message does not hold what its format requires */
    DDL_ETIMEDOUT = -5,  /* a blocking operation waited longer than its timeout */
    DDL_EPEER = -6,      /* a peer died or closed its connection */
    DDL_EMISMATCH = -7,  /* ranks disagree on a collective (sequence, operation, count or type) */
    DDL_ENOTSUP = -8,    /* the feature or plugin is not compiled in, or not supported */
    DDL_EAUTH = -9,      /* a peer failed the handshake: wrong job id, token or protocol version */
    DDL_EPROTO = -10     /* a peer broke the wire protocol (bad header, lying length) */
};

/* ddl_strerror: a short static description of a status code ("peer died or closed"). Never NULL. */
const char *ddl_strerror(int status);

/* Bytes a caller should give for an err buffer; longer messages are cut. */
#define DDL_ERR_BYTES 256

/* ---- logging ----
 * Logging goes through a callback in the config structs; with none set, ddl is silent. */
enum { DDL_LOG_ERROR = 0, DDL_LOG_WARN = 1, DDL_LOG_INFO = 2, DDL_LOG_DEBUG = 3 };
typedef void (*ddl_log_fn)(void *ud, int level, const char *msg);

/* ---- allocator ----
 * Used only by the _create and loading functions. alloc returns memory aligned to at least 16
 * bytes, or NULL; free takes what alloc returned. A NULL `const ddl_allocator *` means
 * malloc/free. */
typedef struct ddl_allocator {
    void *(*alloc)(void *ud, size_t bytes);
    void (*free)(void *ud, void *ptr);
    void *ud;
} ddl_allocator;

#define DDL_ALIGN 64 /* bytes: ddl starts every buffer it carves (parameters, activations) here */

/* Handles, and types defined further down. */
typedef struct ddl_comm ddl_comm;
typedef struct ddl_model ddl_model;
typedef struct ddl_trainer ddl_trainer;
typedef struct ddl_checkpoint ddl_checkpoint;
typedef struct ddl_predictor ddl_predictor;
typedef struct ddl_transport ddl_transport;
typedef struct ddl_model_plugin ddl_model_plugin;
typedef struct ddl_graph ddl_graph;
typedef struct ddl_param_info ddl_param_info;
typedef struct ddl_rng ddl_rng;
typedef struct ddl_pool2d ddl_pool2d; /* a pool's geometry (the ops, below) */
typedef struct ddl_timeline ddl_timeline;
typedef struct ddl_profile ddl_profile; /* a struct the caller owns: see "profiling" at the end */

/* ---- training ----
 * A trainer runs the loop: shuffle with the seed, take this rank's part of every global batch,
 * forward, loss, backward, all-reduce gradients, step. It allocates everything in
 * ddl_trainer_create; nothing allocates per step. With a comm, every call below except the
 * getters is collective: every rank makes it, in the same order. */

enum { DDL_OPTIM_SGD = 0, DDL_OPTIM_ADAM = 1 };

typedef struct ddl_optim_config {
    int kind;           /* DDL_OPTIM_SGD or DDL_OPTIM_ADAM */
    float lr;           /* base learning rate */
    float momentum;     /* SGD: PyTorch's momentum (buffer = momentum * buffer + grad) */
    float weight_decay; /* L2 added to the gradient, as PyTorch's weight_decay */
    float beta1, beta2, eps; /* Adam */
} ddl_optim_config;

enum { DDL_SCHED_CONSTANT = 0, DDL_SCHED_STEP = 1, DDL_SCHED_COSINE = 2 };

typedef struct ddl_schedule {
    int kind;           /* DDL_SCHED_* */
    long warmup_steps;  /* linear warmup from lr / warmup_steps to lr */
    long step_size;     /* STEP: multiply by gamma every step_size steps */
    float gamma;
    long total_steps;   /* COSINE: steps to decay over (to min_lr) */
    float min_lr;
} ddl_schedule;

typedef struct ddl_train_config {
    int epochs;
    int batch;               /* global batch: summed over all ranks */
    ddl_optim_config optim;
    ddl_schedule schedule;
    uint64_t seed;           /* shuffling, dropout and weight initialisation */
    float dice_weight;       /* segmentation: loss = CE + dice_weight * dice (0: CE only) */
    long train_limit;        /* use only the first n training samples (0: all) */
    ddl_comm *comm;          /* NULL: one process */
    ddl_log_fn log;
    void *log_ud;
    long save_bytes_per_sec; /* checkpoints: rank 0 writes no faster than this (0: unlimited), to
                              * spare a shared file system */
    ddl_timeline *timeline;  /* optional: each step records its data, forward, backward,
                              * all-reduce and optimizer spans there (see "watching a run") */
    int micro_batches;       /* this rank's batch in this many parts, each on its own copy of the
                              * model (see the plugin interface), gradients added in order; the
                              * threads run parts side by side when they divide them: the same
                              * bits at any thread count. 0 (auto): one part per 32 samples, up
                              * to DDL_MAX_MICRO_BATCHES, in one process; 1 with ranks (overlap). */
    int augment;             /* DDL_AUGMENT_* of training samples (never of evaluation): FLIP mirrors
                              * half of them left to right, CROP shifts each by -pad..pad pixels
                              * both ways in an image padded with black (torchvision's RandomCrop
                              * with padding). What a sample gets depends only on (seed, epoch,
                              * sample index): every world size and a resumed run see the same
                              * samples. Segmentation masks move with their images. */
    int augment_pad;         /* CROP's padding in pixels (0: 4) */
    int keep_weights;        /* 1: start from the weights the model has (rank 0's, sent to all):
                              * an imported model (ddl_graph_import_onnx), fine-tuning; 0: from seed */
    /* How gradients are exchanged with 2 ranks or more: in buckets of bucket_kb KiB, cut in
     * backward order at layer ends; with overlap 1, on a thread of the trainer's while backward
     * computes the earlier layers (the same sums as without, which all-reduces them after
     * backward); 2: that thread at real-time priority (SCHED_FIFO) where allowed, else as 1,
     * warned; 0 (or -1, its older name): no overlap. bucket_kb 0: 25600 KiB, as PyTorch DDP.
     * ddl_train_config_from_env reads them from DDL_OVERLAP and DDL_BUCKET_KB. */
    int overlap;
    int bucket_kb;
    /* shards > 0: the global batch is cut into this many shards (sample ranges fixed by the batch
     * alone), each rank computes the gradients of a block of world / shards of them (micro-batches,
     * one model copy each) and ddl_comm_allreduce_shards adds them in the order of an all-reduce of
     * `shards` ranks: the weights depend on shards, not on the world size (1 rank with shards 4
     * trains to the bits of 2 or 4 ranks with shards 4), the base of elastic training; on one rank
     * it is gradient accumulation. Needs shards a multiple of the world size with at most
     * DDL_MAX_MICRO_BATCHES per rank, no compression; overlap does not apply. 0: off. */
    int shards;
    /* elastic: when fewer than the comm's elastic_min ranks live, every survivor stops with
     * DDL_EPEER; first the one holding the newest state (the regroup's leader) writes it here as
     * a checkpoint, alone, so the job can resume from it (NULL: nothing is written). */
    const char *stop_checkpoint;
    /* in_order 1: every epoch takes the samples in the data set's order, without shuffling
     * (PyTorch's DataLoader(shuffle=False)): to feed ddl and another framework the same batches.
     * 0: shuffled with the seed. */
    int in_order;
    /* sync_bn 1: BatchNorm layers in training normalise with the statistics of the whole global
     * batch of the step (every rank, every micro-batch or shard), and their backward pass uses
     * the matching global sums: the per-sample sums are combined in the samples' order, so any
     * number of ranks over any transport gives one process's bits (with shards V: those of 1
     * rank with shards V). Costs an all-reduce of (global batch x C) floats per round, three
     * rounds per layer and step, and a thread per micro-batch or shard of a rank after the
     * first (they meet at each layer). Needs no elastic comm, no gradient compression and no
     * overlap (DDL_EINVAL says which). 0: each part normalises with its own batch (PyTorch
     * DDP's default). */
    int sync_bn;

    /* profile: optional: where each step's time goes, filled as the trainer runs (see
     * "profiling" at the end): the peak is measured at ddl_trainer_create (<= 100 ms) and
     * again at each ddl_trainer_epoch_stats (the best kept, outside the epoch's timing), every
     * layer the model's plugin declared is timed forward and backward, and each step's time is
     * split into data, compute, all-reduce wait and optimizer. The weights' bits do not change.
     * NULL: nothing is timed (one test per layer and pass). */
    ddl_profile *profile;

    /* precision DDL_PRECISION_BF16: the products of convolution, transposed convolution and dense
     * layers (and any ddl_gemm a model calls) in training passes, forward and backward, take their
     * inputs (activations, weights, gradients) rounded to bfloat16, to nearest even, and sum in
     * float32, as PyTorch's bfloat16 autocast does; parameters, gradients, optimizer state, the
     * all-reduce, every other layer and evaluation stay float32. Same bits over runs, thread
     * counts, ranks and transports on one kind of CPU (docs/TRAINING.md, "bfloat16"). A CPU with
     * neither AVX512-BF16 nor AMX (or DDL_CPU_NO_BF16=1) makes ddl_trainer_create fail with
     * DDL_EINVAL ("precision bf16: ..."). DDL_PRECISION_FP32 (0): float32, the default. */
    int precision;

    /* conv_algo: the convolutions' algorithm, DDL_CONV_DIRECT (0, the default) or
     * DDL_CONV_WINOGRAD (ddl_conv2d.algo). The model's workspace is sized when it is built, so
     * the model must be built with the same ddl_model_config.conv_algo: a Winograd trainer over a
     * direct model is DDL_EINVAL. 0 trains the model as it was built. */
    int conv_algo;
} ddl_train_config;

enum { DDL_PRECISION_FP32 = 0, DDL_PRECISION_BF16 = 1 };

enum { DDL_AUGMENT_FLIP = 1, DDL_AUGMENT_CROP = 2 };

#define DDL_MAX_MICRO_BATCHES 8

/* ddl_train_config_default: SGD lr 0.01 momentum 0.9 (Adam's betas 0.9, 0.999, eps 1e-8 ready
 * for kind = DDL_OPTIM_ADAM), constant schedule, batch 64, 5 epochs, seed 42, one process. */
void ddl_train_config_default(ddl_train_config *cfg);
/* ddl_train_config_from_env: set, in cfg, what the environment says of the trainer, leaving
 * the rest as it is: overlap from DDL_OVERLAP (0, 1 or 2) and bucket_kb from DDL_BUCKET_KB (1
 * to 1048576; 0 or unset: the default). Returns DDL_OK or DDL_EINVAL (the value named in err). */
int ddl_train_config_from_env(ddl_train_config *cfg, char *err, size_t err_bytes);

typedef struct ddl_epoch_stats {
    double loss;            /* mean training loss over the epoch (all ranks) */
    double accuracy;        /* training accuracy (all ranks) */
    long steps;             /* optimizer steps in the epoch */
    long samples;           /* samples over all ranks */
    double seconds;         /* wall time of the epoch on this rank */
    double images_per_sec;  /* samples / seconds */
    /* Where the time went, for a straggler report (every rank gets the same values but the
     * first two, which are its own): */
    double compute_seconds;   /* this rank: time between its gradient all-reduces: data, forward,
                               * backward, optimizer, and whatever the caller did between steps */
    double allreduce_seconds; /* this rank: time in the gradient all-reduces */
    double lr;                /* learning rate of the last step */
    int slowest_rank;         /* the rank with the most compute_seconds */
    double slowest_seconds;   /* its compute_seconds */
    double fastest_seconds;   /* the least compute_seconds of any rank */
    double comm_frac;         /* all-reduce seconds / (compute + all-reduce seconds), over all ranks */
    int world;                /* ranks at the end of the epoch (elastic: fewer after a failure) */
    int regroups;             /* membership changes since the trainer started (elastic) */
} ddl_epoch_stats;

#define DDL_MAX_CLASSES 1024 /* class indices: bytes in a data set up to 256 classes, uint16 past that */

typedef struct ddl_eval_stats {
    double loss;            /* mean loss per position */
    double accuracy;        /* correct / total positions (pixel accuracy for segmentation) */
    double dice;            /* foreground (class >= 1) against background dice */
    double miou;            /* mean IoU over the classes present in truth or prediction */
    long samples;
    int64_t *confusion;     /* [truth * n_classes + predicted], n_classes^2 counts: ddl_trainer_evaluate's
                             * belong to the trainer and stay valid until its next evaluate or destroy */
} ddl_eval_stats;

/* ddl_eval_metrics: accuracy, dice and miou of e from e->confusion (n_classes x n_classes, as
 * ddl_trainer_evaluate fills it); loss and samples are left as they are. */
void ddl_eval_metrics(ddl_eval_stats *e, int n_classes);

typedef struct ddl_dataset ddl_dataset;

/* ddl_train_local_batch: the batch a rank's model must be built for, for a global batch over
 * comm: ceil(batch / world); with shards (0: the elastic comm's maximum world, or none), the most
 * samples of the shards a rank may hold, at the elastic minimum of ranks. */
int ddl_train_local_batch(int batch, int shards, const ddl_comm *comm);
/* ddl_trainer_create: set up training of m on `train` (both must outlive the trainer). Weights
 * are initialised from cfg->seed on rank 0 and broadcast. Returns DDL_OK with *out set; or, with
 * *out NULL and the reason in err: DDL_EINVAL (data and model disagree in shape or classes, a
 * global batch the model was not built for, batch < 1, micro_batches out of range, sync_bn with
 * an elastic comm, compression or overlap: "sync_bn: ..."), DDL_ENOMEM, or the comm's error when
 * the broadcast of the initial weights fails. */
int ddl_trainer_create(const ddl_train_config *cfg, ddl_model *m, const ddl_dataset *train,
                       const ddl_allocator *alloc, ddl_trainer **out, char *err, size_t err_bytes);
/* ddl_trainer_destroy: free the trainer (NULL is allowed); the model and data stay. */
void ddl_trainer_destroy(ddl_trainer *t);
/* ddl_trainer_step: one optimizer step on the next global batch (starting the next epoch when
 * the current one is done); *loss (may be NULL) gets this rank's mean loss over its part of the
 * batch. Returns DDL_OK or the comm's error (DDL_EPEER, DDL_ETIMEDOUT, DDL_EMISMATCH, ...),
 * after which the trainer's weights may differ between ranks: stop, and resume from a
 * checkpoint. ddl_trainer_error() has the detail. */
int ddl_trainer_step(ddl_trainer *t, double *loss);
/* ddl_trainer_allreduce_int: *value summed (DDL_SUM) or maximised (DDL_MAX) over the trainer's
 * ranks, between steps: a program's own agreement (whether any rank got a signal). On an elastic
 * comm it goes on through a regroup, as the trainer's calls do. Returns DDL_OK, DDL_EINVAL, or the
 * comm's error. */
int ddl_trainer_allreduce_int(ddl_trainer *t, int64_t *value, int op);
/* ddl_trainer_collectives: a program's own sequence of collective calls on the trainer's comm,
 * between steps (an evaluation of its own, a confusion matrix, statistics), made to survive a
 * regroup as the trainer's own calls are: call(ud, comm, i) makes call i (0 <= i < n) and returns
 * its status. On an elastic comm, after a rank is lost or joins, each rank goes on at the call
 * that failed for it, and a rank that missed a call other ranks completed is handed their result
 * (of any size), so the calls match again. call must set its inputs every time it is made, never
 * reusing what an attempt left: a failed all-reduce leaves its buffer half reduced, and the world
 * (ddl_comm_rank, ddl_comm_size) may have changed. restart 1: after a regroup the sequence starts
 * again at call 0 (for sequences whose inputs depend on the world, such as each rank's part of a
 * data set). what names the sequence in errors and logs (NULL: "a program's collectives").
 * Without a comm: DDL_OK, call never made. Returns DDL_OK, DDL_EINVAL, or the comm's error (the
 * first error of a call that is not a lost peer, at once; or fewer ranks than elastic_min). */
int ddl_trainer_collectives(ddl_trainer *t, const char *what, int n, int (*call)(void *ud, ddl_comm *comm, int i),
                            void *ud, int restart);
/* ddl_trainer_epoch: train to the end of the current epoch and fill *out (as
 * ddl_trainer_epoch_stats). Returns DDL_OK or the comm's error, as ddl_trainer_step. */
int ddl_trainer_epoch(ddl_trainer *t, ddl_epoch_stats *out);
/* ddl_trainer_evaluate: loss and metrics of the model on `test`, sharded over the ranks and
 * all-reduced; every rank gets the same result. Returns DDL_OK, DDL_EINVAL (test data of
 * another shape), or the comm's error. */
int ddl_trainer_evaluate(ddl_trainer *t, const ddl_dataset *test, ddl_eval_stats *out);
/* ddl_trainer_error: the detail of the last failure ("" if none). Owned by the trainer. */
const char *ddl_trainer_error(const ddl_trainer *t);
/* ddl_trainer_step_count / _epoch_index: optimizer steps done, and the current epoch (from 0).
 * ddl_trainer_micro_batches: the parts this rank's batch is cut into (micro_batches resolved). */
long ddl_trainer_step_count(const ddl_trainer *t);
int ddl_trainer_epoch_index(const ddl_trainer *t);
int ddl_trainer_micro_batches(const ddl_trainer *t);
/* ddl_trainer_epoch_done: 1 when every sample of the current epoch has been consumed (the next
 * step starts the next epoch), else 0. Lets a caller drive the loop with ddl_trainer_step, e.g.
 * to save a checkpoint every N steps. */
int ddl_trainer_epoch_done(const ddl_trainer *t);
/* ddl_trainer_epoch_stats: loss, accuracy, steps, samples and time of the current epoch so far
 * (after ddl_trainer_resume: of the steps since the resume). Sums over the ranks with an
 * all-reduce: every rank must call it. Returns DDL_OK or the comm's error. */
int ddl_trainer_epoch_stats(ddl_trainer *t, ddl_epoch_stats *out);
/* ddl_trainer_probe: time `reps` all-reduces (after one to warm up) of a buffer of the
 * gradient's size, which is the gradient buffer itself: call it before a step, not between
 * ddl_model_backward and the optimizer. Collective. *seconds gets the slowest rank's mean time
 * per all-reduce (0 with one process). Busbw, as nccl-tests define it, is then
 * 4 n_params / seconds * 2 (world - 1) / world bytes/s. Returns DDL_OK, DDL_EINVAL (reps < 1),
 * or the comm's error. */
int ddl_trainer_probe(ddl_trainer *t, int reps, double *seconds);

/* ---- data ----
 * A data set is n samples of images (C, H, W) with targets (TH, TW): (1, 1) for classification,
 * (H, W) for segmentation. Images are uint8 pixels (`images`) or floats (`fimages`); targets are
 * uint8 class indices (`targets`) or, for more than 256 classes, uint16 (`targets16`): exactly
 * one of each pair is set. Your own data is a ddl_dataset you fill in (owned and alloc NULL).
 * Inputs are normalised with (x / 255 - mean) / std for bytes and (x - mean) / std for floats,
 * so a float is on the scale of a byte / 255 (pixels in 0..1; a pre-normalised array keeps its
 * values with mean 0 and std 1); mean and std come from the training set and belong to the model
 * (ddl_model_set_norm). */

struct ddl_dataset {
    int n;                  /* samples */
    int c, h, w;            /* image shape */
    int th, tw;             /* target shape per sample */
    int n_classes;
    const uint8_t *images;  /* (n, c, h, w) pixels 0..255, or NULL when fimages has them */
    const uint8_t *targets; /* (n, th, tw) class indices, or NULL when targets16 has them */
    void *owned;            /* memory the loader allocated, freed by ddl_dataset_free */
    const ddl_allocator *alloc; /* the loader's allocator: must outlive the data set */
    const char *const *class_names; /* n_classes names (image folders), or NULL */
    const float *fimages;   /* (n, c, h, w) float pixels (finite), when images is NULL */
    const uint16_t *targets16; /* (n, th, tw) class indices, when targets is NULL (classification
                                * with more than 256 classes; loaders use it only then) */
};

/* ddl_dataset_load_mnist: read DIR/SPLIT-images-idx3-ubyte[.gz] and DIR/SPLIT-labels-idx1-ubyte[.gz]
 * (split "train" or "t10k"; Debian's dataset-fashion-mnist puts them in
 * /usr/share/datasets/fashion-mnist) into *out, memory from alloc. Returns DDL_OK; or, with *out
 * zeroed and err naming the file and what was expected and found: DDL_EIO (missing file, or
 * not a regular file),
 * DDL_ECORRUPT (as ddl_idx_load, or images and labels that disagree in count, or a label
 * above 9), DDL_ENOTSUP (gzip without zlib), DDL_ENOMEM, DDL_EINVAL (NULL arguments). */
int ddl_dataset_load_mnist(const char *dir, const char *split, const ddl_allocator *alloc, ddl_dataset *out,
                           char *err, size_t err_bytes);
/* ddl_dataset_stats: mean and standard deviation of every pixel of d, bytes scaled to [0, 1] (x / 255), floats as they are.
 * ddl_dataset_stats_channels: the same for each of d->c channels (mean and std hold d->c). */
void ddl_dataset_stats(const ddl_dataset *d, float *mean, float *std);
void ddl_dataset_stats_channels(const ddl_dataset *d, float *mean, float *std);
/* ddl_dataset_make_scenes: compose n_scenes segmentation scenes from classification items (as
 * Fashion-MNIST): each canvas of size x size pixels holds 1 to max_items items drawn from `items` at
 * random positions, later ones covering earlier ones where they are bright, plus pixel noise. The
 * target of each pixel is 0 (background) or 1 + the class of the item covering it, so
 * out->n_classes = items->n_classes + 1 and th = tw = size. The same seed gives the same bytes.
 * items must be one-channel, with one label per sample and no larger than the canvas. out keeps no
 * pointer into items; its memory comes from alloc (NULL: malloc) and goes with ddl_dataset_free.
 * Returns DDL_OK, DDL_EINVAL (bad arguments) or DDL_ENOMEM; err says which and why. */
int ddl_dataset_make_scenes(const ddl_dataset *items, int n_scenes, int size, int max_items, uint64_t seed,
                            const ddl_allocator *alloc, ddl_dataset *out, char *err, size_t err_bytes);
/* ddl_dataset_split: a validation set of round(n x fraction) samples taken from d (Keras's
 * validation_split, ddl's --val-split), chosen by seed alone (the same on every rank and run),
 * into *val, the rest into *train, each in d's order and with its own memory from alloc (free
 * both with ddl_dataset_free; d is left as it was). Returns DDL_OK, or with both zeroed:
 * DDL_EINVAL (fraction not strictly between 0 and 1, or a part that would be empty), DDL_ENOMEM. */
int ddl_dataset_split(const ddl_dataset *d, double fraction, uint64_t seed, const ddl_allocator *alloc,
                      ddl_dataset *train, ddl_dataset *val, char *err, size_t err_bytes);
/* ddl_dataset_save_cache: d (decoded images, targets, class names) as one file at path, written
 * atomically, with key: the caller's account of where d came from and how it was decoded (a
 * folder's path, its newest change, the image size), which ddl_dataset_load_cache must be given
 * again. ddl_dataset_load_cache: the data set back in one read, memory from alloc (free it with
 * ddl_dataset_free), after checking the header and a CRC-32 of everything. Return DDL_OK;
 * DDL_EIO (no such file, cannot write), DDL_ECORRUPT (damaged, truncated), DDL_EMISMATCH (a cache
 * of another key: rebuild it), DDL_ENOMEM, DDL_EINVAL; err names the file. */
int ddl_dataset_save_cache(const ddl_dataset *d, const char *key, const char *path, char *err, size_t err_bytes);
int ddl_dataset_load_cache(const char *path, const char *key, const ddl_allocator *alloc, ddl_dataset *out, char *err,
                           size_t err_bytes);
/* ddl_dataset_free: free what a loader allocated (a zeroed struct, or one freed already, is fine). */
void ddl_dataset_free(ddl_dataset *d);

/* ddl_idx_load: read an IDX file (gzip or raw, detected) of unsigned bytes, at most 2^31 - 1 of
 * them. On success *data (allocated with alloc; free it with the same, or with free() when alloc
 * is NULL) holds the product of dims bytes, dims[0..*n_dims-1] the dimensions. The size the
 * header claims is checked against the file before it is allocated: a raw file must hold
 * exactly that, a gzip file no more than 1032 times its size (deflate's largest expansion).
 * A missing file, a directory or another file that is not a regular one (a FIFO, a device)
 * gives DDL_EIO; a bad magic, type, dimension, a size the file cannot hold, a short or a
 * damaged gzip file DDL_ECORRUPT; a
 * gzip file in a build without zlib DDL_ENOTSUP; a failed allocation DDL_ENOMEM; NULL arguments
 * DDL_EINVAL; *data is then NULL. err names the file and what was expected and found. zlib's own
 * small buffers come from malloc, not from alloc. */
int ddl_idx_load(const char *path, const ddl_allocator *alloc, uint8_t **data, int *n_dims, int dims[4],
                 char *err, size_t err_bytes);

/* Image files: JPEG (libjpeg-turbo), PNG (libpng), binary PGM and PPM. Each image is decoded,
 * converted to 1 channel (ITU-R BT.601 luma) or 3 (RGB; gray repeated; PNG alpha dropped, as
 * PIL's convert("L") and convert("RGB") do) and resized to the model's input with antialiased
 * bilinear filtering, byte for byte as PIL's Image.resize(BILINEAR) and so torchvision's resize do
 * it. CMYK and YCCK JPEGs are read as PIL reads them (Adobe's inverted CMYK, then PIL's CMYK to
 * RGB). The work is bounded before it is done: at most 2^26 pixels an image; a PNG's compressed
 * image data at most what its rows can need (1/8 more, and 1 KiB); a progressive JPEG's scans at
 * most 500 and 2^30 pixels over all. */
typedef struct ddl_folder_config {
    int channels;           /* 1 or 3 */
    int height, width;      /* the size every image is resized to, 1 to 4096 */
    int skip_bad;           /* 1: a file that cannot be decoded is skipped and counted; 0: an error */
    ddl_log_fn log;         /* optional: with skip_bad, each file left out, at DDL_LOG_WARN ("left out
                             * PATH: why"), the first 10 in sorted order, then a count of the rest */
    void *log_ud;
} ddl_folder_config;
/* ddl_image_load: one image file as channels x height x width bytes (C, H, W) in out. Returns
 * DDL_OK, or with err naming the file: DDL_EIO (cannot read, not a regular file), DDL_ECORRUPT
 * (damaged, not an image, more pixels than the bound above, too much work for its size),
 * DDL_ENOTSUP (16-bit PGM, a format this build lacks), DDL_ENOMEM, DDL_EINVAL (bad arguments, a
 * file over 1 GiB). Scratch memory from alloc (NULL: malloc). */
int ddl_image_load(const char *path, int channels, int height, int width, const ddl_allocator *alloc, uint8_t *out,
                   char *err, size_t err_bytes);
/* ddl_image_decode: the same for an image file's bytes in memory (name names it in messages).
 * exact 0: resized as above, so the pixels are training's and ddl_image_load's for the same file
 * (ddl-serve and the PostgreSQL extension decode every image body this way); exact 1: an image
 * of another size than width x height is refused (DDL_EINVAL, both sizes in err) from its header,
 * before anything is decoded. Returns as ddl_image_load (no DDL_EIO). */
int ddl_image_decode(const char *name, const void *bytes, size_t n, int channels, int height, int width, int exact,
                     const ddl_allocator *alloc, uint8_t *out, char *err, size_t err_bytes);
/* ddl_dataset_load_folder: DIR/CLASS/FILE for every class folder CLASS (sorted by name; its index
 * is the label; names starting with '.' ignored) and every .jpg, .jpeg, .png, .pgm or .ppm file
 * in it (sorted; case of the extension ignored), each through ddl_image_load, side by side on
 * ddl's threads (ddl_set_threads); out->class_names holds the class folders' names. A file that
 * cannot be read is an error naming it (the first one in sorted order, whatever the threads
 * did), or with cfg->skip_bad left out, counted in *n_skipped (may be NULL) and named through
 * cfg->log. Only regular files are read (a FIFO named x.png is passed over, never opened). Labels are
 * bytes (targets), or uint16 (targets16) past 256 classes. alloc is called from ddl's threads
 * and must be thread-safe. Returns DDL_OK, ddl_image_load's codes (DDL_ECORRUPT too when skip_bad
 * left a class no image), DDL_EINVAL (no class folder, a class folder with no image, no image at
 * all, bad arguments) or DDL_ENOTSUP (over DDL_MAX_CLASSES classes), with out zeroed; each
 * message names the file or folder. */
int ddl_dataset_load_folder(const char *dir, const ddl_folder_config *cfg, const ddl_allocator *alloc,
                            ddl_dataset *out, int *n_skipped, char *err, size_t err_bytes);

/* numpy arrays: a .npy file, or one array of a .npz (np.savez, stored, or np.savez_compressed,
 * deflated; zip64 as numpy writes it), little endian, C order. */
enum { DDL_NPY_UINT8 = 1, DDL_NPY_INT8 = 2, DDL_NPY_BOOL = 3, DDL_NPY_INT32 = 4, DDL_NPY_INT64 = 5,
       DDL_NPY_FLOAT32 = 6, DDL_NPY_FLOAT64 = 7 };
#define DDL_NPY_MAX_DIMS 8
typedef struct ddl_npy {
    int dtype;                         /* DDL_NPY_* */
    int n_dims;
    int64_t shape[DDL_NPY_MAX_DIMS];
    int64_t count;                     /* elements: the product of shape */
    void *data;                        /* count elements of dtype, from the loader's allocator */
} ddl_npy;
/* ddl_npy_load: read the array spec names: "FILE.npy", "FILE.npz:NAME" (the array np.savez saved
 * as NAME), or "FILE.npz" when it holds one array. The file is read whole, a deflated member is
 * inflated and its CRC-32 checked; data comes from alloc (NULL: malloc). Returns DDL_OK; else
 * *out is zeroed and err names the file and member and what was expected and found: DDL_EIO
 * (cannot open or read), DDL_ECORRUPT (not .npy or zip, damaged header, data of another length
 * than the shape needs, bad CRC or deflate stream), DDL_ENOTSUP (a dtype other than uint8, int8,
 * bool, int32, int64, float32, float64; big endian; Fortran order; a deflated member without
 * zlib), DDL_EINVAL (no such array: the message lists those the file holds; NULL arguments),
 * DDL_ENOMEM. zlib's own small buffers come from malloc. */
int ddl_npy_load(const char *spec, const ddl_allocator *alloc, ddl_npy *out, char *err, size_t err_bytes);
/* ddl_npy_dtype_bytes: the size of one element of dtype (0: not a DDL_NPY_* type). */
int ddl_npy_dtype_bytes(int dtype);
/* ddl_npy_free: free a's data with the allocator it was loaded with, and zero a (NULL is fine). */
void ddl_npy_free(ddl_npy *a, const ddl_allocator *alloc);
/* ddl_dataset_load_numpy: a data set from two arrays (specs as ddl_npy_load's): images of shape
 * (N, H, W), (N, H, W, C) or (N, C, H, W) with C 1 or 3: uint8 pixels (images), or float32 or
 * float64 pixels kept as floats (fimages) on the scale of a byte / 255: floats in 0..1 as they
 * are, floats in 0..255 (some above 1) divided by 255, anything else (a pre-normalised array) as
 * it is; NaN and infinities are refused. Targets: labels (N,) of any integer type (classes 0 to
 * DDL_MAX_CLASSES - 1; n_classes is the largest + 1; targets16 past 256 classes), or masks
 * (N, H, W) or (N, H, W, 1) for segmentation: integer classes, or bool and float masks
 * thresholded at 0.5 (class 1 where >= 0.5, else 0; n_classes 2). Returns DDL_OK, or with *out
 * zeroed: ddl_npy_load's codes, or DDL_EINVAL for shapes, types or values that do not fit, the
 * message naming the array and its shape. */
int ddl_dataset_load_numpy(const char *images, const char *targets, const ddl_allocator *alloc, ddl_dataset *out,
                           char *err, size_t err_bytes);

/* ---- models ----
 * A model is a plugin (lenet, unet, or your own: see "model plugin interface") built for one
 * configuration into one block of memory: parameters, gradients and activations, each flat
 * and contiguous, so the all-reduce works on one buffer. */

typedef struct ddl_model_config {
    int batch;             /* most samples per forward pass (this rank's part of a global batch) */
    int in_c, in_h, in_w;  /* input (batch, in_c, in_h, in_w) */
    int n_classes;         /* output classes, 2 to DDL_MAX_CLASSES */
    float dropout;         /* drop probability where the model has dropout (0: none) */

    /* conv_algo: the algorithm of the built-in plugins' convolutions (ddl_conv2d.algo):
     * DDL_CONV_DIRECT (0) or DDL_CONV_WINOGRAD; it sizes the workspace, so it is chosen here. */
    int conv_algo;

    /* plugin_config: the plugin's own settings, which its build reads (NULL: its defaults): a
     * ddl_unet_config for unet, the ddl_graph for graph (copied by the build: it may go once the
     * model is built), a struct of a user plugin's own. A built model's config (ddl_model_get_config)
     * points it at the copy the plugin keeps in its state (ddl_build_plugin_config), else NULL. */
    const void *plugin_config;
} ddl_model_config;

/* ddl_unet_config: U-Net's settings (ddl_model_config.plugin_config): levels and base channels
 * (0: the defaults, 3 and 8). */
typedef struct ddl_unet_config {
    int depth, width;
} ddl_unet_config;

/* Getters of the built-in models. ddl_model_find: look one up by name; NULL if unknown.
 * ddl_model_graph: the plugin that builds the ddl_graph in cfg.plugin_config (see "layer graphs"). */
const ddl_model_plugin *ddl_model_lenet(void);
const ddl_model_plugin *ddl_model_unet(void);
const ddl_model_plugin *ddl_model_graph(void);
const ddl_model_plugin *ddl_model_find(const char *name);

/* ddl_model_create: build the model for cfg in memory from alloc. Returns DDL_OK with *out set;
 * or, with *out NULL and the reason in err ("unet: input 60x60 is not divisible by 2^depth =
 * 8"): DDL_EINVAL (a configuration the plugin cannot build, a plugin of another version) or
 * DDL_ENOMEM. */
int ddl_model_create(const ddl_model_plugin *p, const ddl_model_config *cfg, const ddl_allocator *alloc,
                     ddl_model **out, char *err, size_t err_bytes);
/* ddl_model_destroy: free a model from ddl_model_create (NULL, and a model in caller memory,
 * are allowed: nothing happens). */
void ddl_model_destroy(ddl_model *m);
/* ddl_model_check: DDL_OK if the plugin can build cfg, else DDL_EINVAL with the reason in err. */
int ddl_model_check(const ddl_model_plugin *p, const ddl_model_config *cfg, char *err, size_t err_bytes);
/* ddl_model_sizeof: bytes ddl_model_init needs for this plugin and config (alignment slack
 * included); 0 if the config is invalid (ddl_model_check says why). */
size_t ddl_model_sizeof(const ddl_model_plugin *p, const ddl_model_config *cfg);
/* ddl_model_init: build the model in caller memory (any 16-byte-aligned address, at least
 * ddl_model_sizeof bytes, owned by the caller until the model is no longer used). Returns as
 * ddl_model_create; DDL_ENOMEM when bytes is too small. */
int ddl_model_init(void *mem, size_t bytes, const ddl_model_plugin *p, const ddl_model_config *cfg,
                   ddl_model **out, char *err, size_t err_bytes);

/* Getters. The model owns what they point to. */
const char *ddl_model_name(const ddl_model *m);
const ddl_model_config *ddl_model_get_config(const ddl_model *m);
/* ddl_model_params / _grads: the flat parameter and gradient buffers (ddl_model_n_params floats,
 * DDL_ALIGN-aligned). */
float *ddl_model_params(ddl_model *m);
float *ddl_model_grads(ddl_model *m);
size_t ddl_model_n_params(const ddl_model *m);
int ddl_model_n_tensors(const ddl_model *m);
/* ddl_model_tensor: describe parameter tensor i (0 <= i < ddl_model_n_tensors). */
const ddl_param_info *ddl_model_tensor(const ddl_model *m, int i);
/* ddl_model_output_shape: classes, H, W of the logits per sample. */
void ddl_model_output_shape(const ddl_model *m, int *c, int *h, int *w);
/* ddl_model_init_weights: He/Glorot/zero initialisation from the library's PRNG seeded with seed. */
void ddl_model_init_weights(ddl_model *m, uint64_t seed);
/* ddl_model_set_norm / _norm: the input normalisation that belongs to the model: pixels p in
 * 0..255 go in as (p / 255 - mean) / std, one mean and std for every channel. */
void ddl_model_set_norm(ddl_model *m, float mean, float std);
void ddl_model_norm(const ddl_model *m, float *mean, float *std);
/* ddl_model_set_norm_channels: a mean and std per input channel (torchvision's Normalize), for
 * models of 2 to DDL_MAX_NORM_CHANNELS channels; DDL_EINVAL (nothing changed) for another count or
 * a std <= 0. ddl_model_norm_channels: in_c means and stds (the one of ddl_model_set_norm
 * repeated when there are no per-channel values); returns 1 if they are per channel. */
#define DDL_MAX_NORM_CHANNELS 4
int ddl_model_set_norm_channels(ddl_model *m, const float *mean, const float *std);
int ddl_model_norm_channels(const ddl_model *m, float *mean, float *std);
/* ddl_model_forward: logits of x (batch, in_c, in_h, in_w), already normalised; returns a view of
 * (batch, C, H, W) floats owned by the model, valid until the next call; NULL when batch is
 * not in [1, cfg.batch]. rng (dropout) may be NULL when training is 0. */
const float *ddl_model_forward(ddl_model *m, const float *x, int batch, int training, ddl_rng *rng);
/* ddl_model_backward: accumulate parameter gradients of the last forward from dlogits (nothing
 * happens when batch is not in [1, cfg.batch]). */
void ddl_model_backward(ddl_model *m, const float *x, int batch, const float *dlogits);
/* ddl_model_check_grads: check m's backward against finite differences, for authors of model
 * plugins. With x (batch, in_c, in_h, in_w) and the loss sum(logits * r), r a fixed random tensor
 * from seed, it compares the gradient backward gives (in evaluation mode: no dropout) with
 * (L(w + e) - L(w - e)) / 2e, e = 2e-3 * max(1, |w|), for up to per_tensor entries spread over
 * each parameter tensor; an entry whose one-sided differences disagree by more than tol / 2 has
 * a ReLU or max-pool kink within e and is skipped. *worst (may be NULL) gets the largest error
 * |a - n| / max(|a| + |n|, 1e-2), and err the tensor and entry where it was. Parameters are
 * restored, gradients left as backward's. Returns DDL_OK when worst <= tol, DDL_EMISMATCH when
 * not (or when more entries were skipped than checked), DDL_EINVAL (batch out of range,
 * per_tensor < 1). Not for use while training: it changes the weights as it goes. */
int ddl_model_check_grads(ddl_model *m, const float *x, int batch, uint64_t seed, int per_tensor, double tol,
                          double *worst, char *err, size_t err_bytes);
/* ddl_model_zero_grads: set every gradient to 0. */
void ddl_model_zero_grads(ddl_model *m);
/* ddl_model_describe: m as the text of a layer graph (the plugin's describe; writes at most bytes,
 * NUL included); returns the whole length, 0 when the plugin cannot describe itself. */
size_t ddl_model_describe(const ddl_model *m, char *buf, size_t bytes);
/* ddl_model_crc: CRC-32 of the parameter buffer: equal values mean bit-identical weights. */
uint32_t ddl_model_crc(const ddl_model *m);
/* ddl_model_signature: CRC-32C of every parameter tensor's name and shape, in order. Two
 * models can exchange weights exactly when their signatures are equal. */
uint32_t ddl_model_signature(const ddl_model *m);

/* ---- layer graphs ----
 * A model described as data: layers joined into a graph, from C (a call per layer) or from a
 * small text file, and built by the plugin ddl_model_graph(), which derives the backward pass
 * from the graph and runs the same core kernels as the hand-written plugins (bit for bit: LeNet
 * and U-Net as graphs give their plugins' logits and gradients). Layers are added in order and
 * take only earlier layers as inputs, so the order of the calls is the order of the forward pass.
 * Shapes are resolved when a model is built from its config: the input may take in_c, in_h, in_w
 * from it, and a layer's output count may be DDL_CLASSES (cfg.n_classes), so one graph serves
 * any image size and class count. Parameter names are PyTorch's: a named layer "conv1" owns
 * "conv1.weight" and "conv1.bias"; an unnamed one is numbered as nn.Sequential numbers its
 * modules (the input is not one): "0.weight". Init: He for convolutions and dense layers, Glorot
 * for the layer that makes the output, zero biases, GroupNorm weight 1.
 *
 * Each call returns the new layer's index (>= 0), or -1 when the layer is wrong (an input out of
 * range, a size < 1, a name of 32 bytes or more, more than DDL_GRAPH_MAX_LAYERS layers); errors
 * are sticky: after one, every call returns -1 and ddl_graph_error() names the first. A graph
 * holds no pointers: copy it as bytes, build any number of models from it. */

#define DDL_GRAPH_MAX_LAYERS 1024 /* ResNet-152 with its BatchNorms and ReLUs: about 520 */
#define DDL_GRAPH_NAME_BYTES 32
#define DDL_CLASSES (-1) /* a layer's output count, an input's size: take it from the model config */

enum { DDL_HEAD_XENT = 0, DDL_HEAD_DICE = 1 }; /* what the output is trained with (ddl_graph_output) */

/* ddl_graph_sizeof / _init: an empty graph in caller memory (DDL_ALIGN-aligned, at least
 * ddl_graph_sizeof() bytes); NULL if mem is NULL, misaligned or too small.
 * ddl_graph_create / _destroy: the same from alloc (NULL: malloc); DDL_OK or DDL_ENOMEM. */
size_t ddl_graph_sizeof(void);
ddl_graph *ddl_graph_init(void *mem, size_t bytes);
int ddl_graph_create(const ddl_allocator *alloc, ddl_graph **out);
void ddl_graph_destroy(ddl_graph *g, const ddl_allocator *alloc);

/* The layers. x, a, b: indices of earlier layers. name: NULL or "" for none, else letters,
 * digits, '.', '_' and '-', starting with a letter. */
int ddl_graph_input(ddl_graph *g, int c, int h, int w);  /* DDL_CLASSES (or 0) each: from cfg */
int ddl_graph_conv2d(ddl_graph *g, int x, const char *name, int out_c, int k, int stride, int pad, int bias);
int ddl_graph_deconv2d(ddl_graph *g, int x, const char *name, int out_c, int k, int stride, int pad);
int ddl_graph_maxpool(ddl_graph *g, int x, int k, int stride);
int ddl_graph_avgpool(ddl_graph *g, int x, int k, int stride);
int ddl_graph_global_avgpool(ddl_graph *g, int x);        /* (C, H, W) -> (C, 1, 1) */
int ddl_graph_dense(ddl_graph *g, int x, const char *name, int out); /* any input, read flat */
int ddl_graph_linear(ddl_graph *g, int x, const char *name, int out, int bias); /* bias 0: nn.Linear(bias=False) */
int ddl_graph_relu(ddl_graph *g, int x);
int ddl_graph_dropout(ddl_graph *g, int x, float p);      /* 0 <= p < 1; p < 0: cfg.dropout */
int ddl_graph_groupnorm(ddl_graph *g, int x, const char *name, int groups); /* 0: the largest <= 8 */
int ddl_graph_flatten(ddl_graph *g, int x);               /* (C, H, W) -> (C * H * W, 1, 1) */
int ddl_graph_concat(ddl_graph *g, int a, int b);         /* along channels; same H and W */
int ddl_graph_add(ddl_graph *g, int a, int b);            /* same shapes */
int ddl_graph_shuffle(ddl_graph *g, int x, int groups);   /* ShuffleNet's channel shuffle: channel i * (C /
                                                            * groups) + j goes to j * groups + i */
int ddl_graph_slice(ddl_graph *g, int x, int start, int count); /* channels start .. start + count - 1 */
int ddl_graph_mul(ddl_graph *g, int a, int b);            /* a * b: same shapes, or either (C, 1, 1)
                                                            * times the other's C planes, or (1, H, W)
                                                            * times each of the other's H x W planes */
/* ddl_graph_name: name layer i (parameter-free layers too, so text files can refer to them). */
int ddl_graph_name(ddl_graph *g, int i, const char *name);
/* ddl_graph_output: make layer x the model's output (default: the last layer) and say how it is
 * trained: DDL_HEAD_XENT (softmax cross-entropy) or DDL_HEAD_DICE (cross-entropy plus dice, for
 * segmentation; programs set ddl_train_config.dice_weight from it). Returns x or -1. */
int ddl_graph_output(ddl_graph *g, int x, int head);
/* Getters: layers, the output layer, its head, the first error ("" if none), the input's size
 * (0 where it comes from the model config; all 0 without an input layer). */
int ddl_graph_n_layers(const ddl_graph *g);
void ddl_graph_input_shape(const ddl_graph *g, int *c, int *h, int *w);
int ddl_graph_output_layer(const ddl_graph *g);
int ddl_graph_head(const ddl_graph *g);
const char *ddl_graph_error(const ddl_graph *g);

/* ddl_graph_output_shape: the output's per-sample shape (c, h, w) of g built for cfg (its input
 * and class count where g leaves them open; batch and the rest are not read). DDL_OK, or
 * DDL_EINVAL when g cannot be built for cfg (ddl_model_check says why). */
int ddl_graph_output_shape(const ddl_graph *g, const ddl_model_config *cfg, int *c, int *h, int *w);
/* ddl_graph_parse: replace g by the graph of a text (the "arch" format, one layer per line; the
 * README and ddl_graph_format show it). ddl_graph_load: the same from a file, or a preset's name
 * ("lenet", "unet", "cnn": see ddl_graph_preset) when path names no file. Return DDL_OK, or
 * DDL_EINVAL with "line N: ..." in err (DDL_EIO: unreadable file). */
int ddl_graph_parse(ddl_graph *g, const char *text, char *err, size_t err_bytes);
int ddl_graph_load(ddl_graph *g, const char *path, char *err, size_t err_bytes);
/* ddl_graph_format: the text of g, which ddl_graph_parse reads back to the same graph. Writes at
 * most bytes (NUL included); returns the length the whole text needs (without the NUL). */
size_t ddl_graph_format(const ddl_graph *g, char *buf, size_t bytes);
/* ddl_graph_preset: g = a built-in network: "lenet" (LeNet-5 for 1x28x28, as ddl_model_lenet),
 * "unet" (ddl_model_unet's U-Net, depth 3 and width 8; "unet:D:W" for others), "cnn" (a small
 * VGG-style classifier for any input size: three stages of two 3x3 convs with ReLU and a
 * max-pool, widths 32, 64, 128, global average pooling, dropout, dense to the classes).
 * DDL_OK or DDL_EINVAL (an unknown name, in err). */
int ddl_graph_preset(ddl_graph *g, const char *name, char *err, size_t err_bytes);

/* ddl_graph_import_onnx: g and its weights from an ONNX file another tool wrote (PyTorch's
 * torch.onnx.export, onnx.helper, ddl's export; opsets 7 to 18): Conv, ConvTranspose, Relu,
 * MaxPool, AveragePool, GlobalAveragePool, Gemm, MatMul (and the Add of its bias), Flatten,
 * Reshape to (N, K), Concat (channels), Add, Dropout (a dropout layer), Identity and a Pad of
 * zeros (folded into the Conv or AveragePool after it), a last Softmax over the classes (dropped:
 * the output is the logits; output_softmax says so), and Mul/Div/Add/Sub of a scalar or
 * per-channel constant: on the input, kept as its normalisation (scale and shift, per channel in
 * n_norm), elsewhere an affine layer; the activations of ddl_graph_act and ddl_graph_softmax
 * (Sigmoid, Tanh, LeakyRelu, Elu, HardSigmoid, HardSwish, Clip, Softmax and LogSoftmax on any
 * axis, and the node patterns PyTorch writes for SiLU, GELU and Hardswish); convolutions and
 * pools of any 2-D geometry (kernel_shape, strides, pads, dilations, group, auto_pad,
 * output_padding, output_shape, ceil_mode, count_include_pad; ConvTranspose takes no group).
 * Resize and Upsample (a resize layer), InstanceNormalization, GroupNormalization and torch's
 * GroupNorm pattern (a groupnorm layer), and the Shape, Gather, Slice, Concat, Unsqueeze, ...
 * around reshapes, folded (the input's size is fixed, the batch free); BatchNormalization (a
 * batchnorm layer; its running statistics in out->buffers). Every attribute is one ONNX defines
 * for the op and is honoured, or the node is refused, named with the attribute and its value;
 * any other node is refused, named (docs/DATA.md, "ONNX operators", says what and why).
 * Nothing in the file is trusted: a weight's dims must be those its layer takes from the graph
 * before it (its data exactly that many float32s), and a dim, count or attribute out of range
 * is refused with the node, the tensor and the value named, before anything is allocated.
 * out->params (from alloc; free with ddl_onnx_import_free) holds the weights in the order a model
 * ddl_model_graph() builds from g declares them: ddl_onnx_import_load puts them there. Returns
 * DDL_OK, DDL_EINVAL (a node or file ddl does not take, named in err), DDL_EIO, DDL_ENOMEM. */
typedef struct ddl_onnx_import {
    float *params;             /* the weights, in the model's order */
    size_t n_params;
    int in_c, in_h, in_w;      /* the input's size */
    float scale, shift;        /* what the model does to its input first: x = input * scale + shift
                                * (1 and 0 when nothing): ddl folds it into the normalisation;
                                * with n_norm, channel 0's */
    float *buffers;            /* BatchNorm's running statistics, in the model's order (ddl_model_set_buffers);
                                * NULL when there are none; freed with params */
    size_t n_buffers;
    int n_norm;                /* > 0 (in_c): per channel instead, x[c] = input[c] * norm_scale[c] + norm_shift[c] */
    float norm_scale[DDL_MAX_NORM_CHANNELS], norm_shift[DDL_MAX_NORM_CHANNELS];
    int own_norm;              /* 1: the model normalises its input itself (folded here, or a layer) */
    int output_softmax;        /* the last node, dropped: 1 Softmax, 2 LogSoftmax over the channels (0: none);
                                * ddl's output is the logits, and its predictor's the Softmax of them */
} ddl_onnx_import;
int ddl_graph_import_onnx(ddl_graph *g, const char *path, const ddl_allocator *alloc, ddl_onnx_import *out, char *err,
                          size_t err_bytes);
void ddl_onnx_import_free(ddl_onnx_import *im, const ddl_allocator *alloc);

/* ddl_onnx_import_load: finish m, a model ddl_model_graph() built from the graph
 * ddl_graph_import_onnx made (its input im's in_c x in_h x in_w, its classes the channels of
 * ddl_graph_output_shape): im's weights and running statistics copied in, and the input scaling
 * the file starts with made m's normalisation (pixels p -> p * scale + shift is mean -shift std,
 * std 1 / (255 scale); one per channel with n_norm), so m runs as the file does. A program that
 * normalises with its data's statistics instead (own_norm 0) sets them after. Returns DDL_OK, or
 * DDL_EINVAL when m's weights or running statistics are not as many as im's (err says both
 * counts; m is left as it was). The import and m stay the caller's. */
int ddl_onnx_import_load(const ddl_onnx_import *im, ddl_model *m, char *err, size_t err_bytes);

/* ---- layer graphs: convolution and pooling geometry ----
 * Convolutions and pools beyond square kernels, equal strides and symmetric pads: rectangular
 * kernels, a stride per axis, a pad per side, dilation, grouped and depthwise convolution
 * (groups == in channels), ConvTranspose's output padding, and pools' ceil_mode and
 * count_include_pad. A zero field keeps the default named beside it, so a geometry of only
 * out_c, k_h and stride_h is ddl_graph_conv2d's layer, byte for byte. Each returns the layer's
 * index, or -1 (sticky, ddl_graph_error names the layer and the field) for a value out of range:
 * sizes, strides and pads 0 to 32767 (kernels and strides >= 1), dilation and output padding 0
 * to 255, groups that divide neither channel count (checked when the model is built), groups on
 * a transposed convolution (not taken). */
typedef struct ddl_conv_geometry {
    int out_c;                        /* output channels, or DDL_CLASSES */
    int k_h, k_w;                     /* kernel; k_w 0: k_h */
    int stride_h, stride_w;           /* 0: 1, and stride_w 0: stride_h */
    int pad_t, pad_l, pad_b, pad_r;   /* zero padding of each side (transposed: cropped) */
    int dilation_h, dilation_w;       /* 0: 1, and dilation_w 0: dilation_h */
    int groups;                       /* 0: 1; in_c for a depthwise convolution */
    int no_bias;                      /* 1: no bias (convolution only) */
    int out_pad_h, out_pad_w;         /* transposed: ConvTranspose2d's output_padding */
} ddl_conv_geometry;
int ddl_graph_conv2d_ex(ddl_graph *g, int x, const char *name, const ddl_conv_geometry *geo);
int ddl_graph_deconv2d_ex(ddl_graph *g, int x, const char *name, const ddl_conv_geometry *geo);
/* ddl_graph_maxpool_ex / _avgpool_ex: a pool of ddl_pool2d's geometry (stride_w 0: stride_h,
 * k_w 0: k_h; average pooling takes no dilation). */
int ddl_graph_maxpool_ex(ddl_graph *g, int x, const ddl_pool2d *p);
int ddl_graph_avgpool_ex(ddl_graph *g, int x, const ddl_pool2d *p);
/* ---- activation layers ----
 * The activations PyTorch users write, as layers of a graph (the arch text format names them
 * after the kind: "sigmoid", "leakyrelu alpha=0.1", "clip min=0 max=6", "softmax axis=1"; see
 * ddl_graph_parse). Each is computed by ddl_act_forward / ddl_softmax_forward (below), and its
 * backward is derived and checked against finite differences (tests/test_act.c). Parameter-free:
 * they change no weight's name or count. */

/* The kinds of ddl_graph_act, and what alpha and beta are to each:
 *   LEAKY_RELU   x > 0 ? x : alpha x              (nn.LeakyReLU(alpha); PyTorch's default 0.01)
 *   SIGMOID      1 / (1 + e^-x)
 *   TANH         tanh x
 *   SILU         x sigmoid(x)                     (nn.SiLU, "swish")
 *   GELU         x (1 + erf(x / sqrt 2)) / 2      (nn.GELU())
 *   GELU_TANH    x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))) / 2   (nn.GELU(approximate='tanh'))
 *   HARDSWISH    x min(max(x / 6 + 1/2, 0), 1)    (nn.Hardswish)
 *   HARDSIGMOID  min(max(alpha x + beta, 0), 1)   (nn.Hardsigmoid: alpha 1/6, beta 1/2)
 *   CLIP         min(max(x, alpha), beta)         (nn.ReLU6: alpha 0, beta 6; nn.Hardtanh; the
 *                                                 bounds may be -INFINITY and INFINITY)
 *   ELU          x > 0 ? x : alpha (e^x - 1)      (nn.ELU(alpha))
 * Values are only ever appended. */
enum {
    DDL_ACT_LEAKY_RELU = 1,
    DDL_ACT_SIGMOID = 2,
    DDL_ACT_TANH = 3,
    DDL_ACT_SILU = 4,
    DDL_ACT_GELU = 5,
    DDL_ACT_GELU_TANH = 6,
    DDL_ACT_HARDSWISH = 7,
    DDL_ACT_HARDSIGMOID = 8,
    DDL_ACT_CLIP = 9,
    DDL_ACT_ELU = 10
};
/* ddl_graph_act: an element-wise activation of layer x (any shape, kept), of a kind above with
 * its alpha and beta (not read by the kinds that take none: pass 0). Returns the layer or -1 (an
 * unknown kind; an alpha or beta that is NaN or, but for CLIP's bounds, infinite; CLIP with
 * alpha > beta). */
int ddl_graph_act(ddl_graph *g, int x, int kind, float alpha, float beta);
/* ddl_graph_softmax: softmax of layer x over its axes `axis` to `to` taken together, numbered as
 * PyTorch numbers a (N, C, H, W) tensor: 1 the channels, 2 the rows, 3 the columns (a flattened
 * or dense layer's features are its channels, 1). One axis (to == axis) is torch.softmax(x, dim);
 * axis 1 to 3 is a softmax over all of a sample's values (what ONNX's Softmax before opset 13 did
 * for axis 1). log: 1 for LogSoftmax. The output keeps x's shape. Returns the layer or -1 (axes
 * not 1 <= axis <= to <= 3). The model's output needs none: ddl's loss and its predictor apply
 * the softmax over the classes themselves. */
int ddl_graph_softmax(ddl_graph *g, int x, int axis, int to, int log);
/* ---- resize: nearest and bilinear up- and downsampling ----
 * A layer that resizes each (H, W) plane as ONNX's Resize does (and PyTorch's nn.Upsample and
 * F.interpolate, exported): each output pixel's source coordinate is x_out transformed by
 * `coord`, then either rounded to one input pixel (nearest) or read between the four around it
 * (linear), clamped to the plane. The kernels run by planes, one thread each: the backward pass
 * (a scatter into the input's gradient) sums in a fixed order whatever the thread count.
 * As PyTorch writes them: nn.Upsample(mode="nearest") is NEAREST, ASYMMETRIC, FLOOR;
 * mode="bilinear" is LINEAR with HALF_PIXEL (align_corners=False) or ALIGN_CORNERS (True). */
enum { DDL_RESIZE_NEAREST = 0, DDL_RESIZE_LINEAR = 1 };
enum { /* the source coordinate of output pixel x (of out pixels from in, scale s) */
    DDL_RESIZE_ASYMMETRIC = 0,         /* x / s */
    DDL_RESIZE_HALF_PIXEL = 1,         /* (x + 0.5) / s - 0.5 */
    DDL_RESIZE_PYTORCH_HALF_PIXEL = 2, /* the same, 0 when out is 1 */
    DDL_RESIZE_ALIGN_CORNERS = 3       /* x (in - 1) / (out - 1), 0 when out is 1 */
};
enum { /* nearest: how a source coordinate becomes a pixel */
    DDL_RESIZE_FLOOR = 0, DDL_RESIZE_CEIL = 1, DDL_RESIZE_ROUND_PREFER_FLOOR = 2, DDL_RESIZE_ROUND_PREFER_CEIL = 3
};
/* ddl_resize2d: one resize of x (batch, c, in_h, in_w) to y (batch, c, out_h, out_w). scale_h and
 * scale_w are what the coordinate divides by: the scales given, or out / in when sizes were. */
typedef struct ddl_resize2d {
    int batch, c, in_h, in_w, out_h, out_w;
    int mode, coord, nearest;  /* DDL_RESIZE_* */
    float scale_h, scale_w;
} ddl_resize2d;
/* ddl_resize2d_forward: y = the resize of x. ddl_resize2d_backward: dx (overwritten) = the sum,
 * for each output pixel, of its dy times the weight it took each input pixel with. */
void ddl_resize2d_forward(const ddl_resize2d *r, const float *x, float *y);
void ddl_resize2d_backward(const ddl_resize2d *r, const float *dy, float *dx);
/* ddl_graph_resize: a resize layer of x, as above. scale_h, scale_w > 0 give the output size
 * floor(in * scale) (as ONNX computes it, in float); out_h, out_w > 0 fix it instead (then the
 * scales must be 0). Returns the layer's index, or -1 (a mode, coord or rounding out of range,
 * neither or both of scales and sizes given). */
int ddl_graph_resize(ddl_graph *g, int x, int mode, int coord, int nearest, float scale_h, float scale_w, int out_h,
                     int out_w);
/* ---- batch normalisation and model buffers ----
 * BatchNorm as PyTorch's nn.BatchNorm2d: in training, each channel is normalised with the mean
 * and biased variance of its values over (N, H, W) of the batch the forward pass gets, and the
 * running statistics move towards the batch's: running = (1 - momentum) running + momentum
 * batch, the variance's with the unbiased batch variance (n / (n - 1)). In evaluation (training
 * 0: ddl_predictor, ddl-serve, --predict, the PostgreSQL extension, the ONNX export) the running
 * statistics normalise. They are the model's "buffers": state that is not trained, kept beside
 * the parameters (not in the gradient, not in ddl_model_crc), saved in checkpoints and exported.
 * Under data-parallel training each part of a step (a rank's batch, a micro-batch, a virtual
 * shard) normalises with its own statistics, and the trainer averages the parts' running
 * statistics in a fixed order, so every rank holds the same ones (docs/TRAINING.md). */

#define DDL_BN_MOMENTUM 0.1f /* PyTorch's defaults */
#define DDL_BN_EPS 1e-5f
/* ddl_graph_batchnorm: BatchNorm2d of x's channels, parameters "NAME.weight" (gamma, init 1) and
 * "NAME.bias" (beta, init 0), buffers "NAME.running_mean" (0) and "NAME.running_var" (1).
 * momentum in [0, 1] (< 0: DDL_BN_MOMENTUM), eps > 0 (<= 0: DDL_BN_EPS). Returns the layer or
 * -1 as the other layers. */
int ddl_graph_batchnorm(ddl_graph *g, int x, const char *name, float momentum, float eps);

/* ddl_build_buffer: for model plugins: declare a buffer (state the forward pass keeps that is
 * not trained) of 1 to 4 dims, initialised as init says (DDL_INIT_ZERO or DDL_INIT_ONE, at build
 * and by ddl_model_init_weights). Returns its view (NULL while measuring), which the forward pass
 * reads; *next gets the view that a forward pass in training mode writes its new value to (all
 * of it): ddl_model_forward then copies it into the buffer, and a trainer combines every part's
 * before it does (so a step redone after a failure starts from the same buffers). The build
 * fails as ddl_build_param's (DDL_MAX_BUFFERS tensors at most). */
#define DDL_MAX_BUFFERS 1024
struct ddl_model_build; /* ddl_model_build, of the model plugin interface below */
float *ddl_build_buffer(struct ddl_model_build *b, const char *name, int n_dims, const int *shape, int init, float **next);
/* Getters: the flat buffer block (ddl_model_n_buffers floats, buffer after buffer), the buffer
 * tensors (offset and count index the block; NULL when i is out of range), and the CRC-32 of
 * the block (0 without buffers). ddl_model_set_buffers: copy n floats in (DDL_EINVAL when n is
 * not ddl_model_n_buffers). */
float *ddl_model_buffers(ddl_model *m);
size_t ddl_model_n_buffers(const ddl_model *m);
int ddl_model_n_buffer_tensors(const ddl_model *m);
const ddl_param_info *ddl_model_buffer_tensor(const ddl_model *m, int i);
uint32_t ddl_model_buffers_crc(const ddl_model *m);
int ddl_model_set_buffers(ddl_model *m, const float *v, size_t n);
/* A checkpoint of a model with buffers carries them (section BUFS; files of other models are
 * unchanged). Getters: the values, their count, the tensors (NULL out of range); owned by the
 * checkpoint. ddl_checkpoint_load_buffers: copy them into m (ddl_checkpoint_check_model checks
 * they fit, as it does the weights): DDL_OK, or DDL_EINVAL naming the buffer that differs. */
const float *ddl_checkpoint_buffers(const ddl_checkpoint *ck);
size_t ddl_checkpoint_n_buffers(const ddl_checkpoint *ck);
int ddl_checkpoint_n_buffer_tensors(const ddl_checkpoint *ck);
const ddl_param_info *ddl_checkpoint_buffer_tensor(const ddl_checkpoint *ck, int i);
int ddl_checkpoint_load_buffers(const ddl_checkpoint *ck, ddl_model *m, char *err, size_t err_bytes);
/* ddl_model_check_grads_training: ddl_model_check_grads with every forward pass in training
 * mode (BatchNorm's batch statistics, which the backward pass differentiates through; dropout
 * drawn from the same seed each pass). The buffers move with every pass (reset them after). */
int ddl_model_check_grads_training(ddl_model *m, const float *x, int batch, uint64_t seed, int per_tensor, double tol,
                                   double *worst, char *err, size_t err_bytes);

/* The kernels (src/core/batchnorm.c), x and y (N, C, S), S = H * W, per channel gamma, beta (C).
 * ddl_batchnorm_forward_train: y = (x - mean) rstd gamma + beta with the batch's mean and
 * rstd = 1 / sqrt(var + eps), var biased; mean_rstd (C, 2) kept for backward; next_mean and
 * next_var (C) = (1 - momentum) running + momentum batch (var unbiased; biased when N S is 1).
 * ddl_batchnorm_forward_eval: the same with the running statistics; mean_rstd (C, 2) gets them.
 * ddl_batchnorm_backward: dgamma += sum dy xh, dbeta += sum dy, xh the normalised x; dx (may be
 * NULL) = the full gradient through the batch statistics when batch_stats, else dy gamma rstd
 * (evaluation). Threads by channel: the same bits at any thread count. */
void ddl_batchnorm_forward_train(int n, int c, int s, float momentum, float eps, const float *x, const float *gamma,
                                 const float *beta, const float *run_mean, const float *run_var, float *y,
                                 float *mean_rstd, float *next_mean, float *next_var);
void ddl_batchnorm_forward_eval(int n, int c, int s, float eps, const float *x, const float *gamma, const float *beta,
                                const float *run_mean, const float *run_var, float *y, float *mean_rstd);
void ddl_batchnorm_backward(int n, int c, int s, int batch_stats, const float *x, const float *gamma,
                            const float *mean_rstd, const float *dy, float *dx, float *dgamma, float *dbeta);

/* ddl_graph_affine: y = x * scale[c] + shift[c] for each channel c of x: constants, nothing to
 * train (how the ONNX import keeps a per-channel Mul, Div, Add or Sub of constants that is not the
 * input's normalisation). channels: x's (1 to DDL_GRAPH_MAX_AFFINE; checked against x when a
 * model is built); scale and shift (finite) are copied into g, which holds DDL_GRAPH_MAX_AFFINE
 * channels over all its affine layers. Text: "affine C scale=S1,S2,.. shift=T1,T2,..". The new
 * layer's index, or -1 with the error in g (ddl_graph_error). */
#define DDL_GRAPH_MAX_AFFINE 64
int ddl_graph_affine(ddl_graph *g, int x, int channels, const float *scale, const float *shift);

/* ---- communication ----
 * A comm joins the ranks of one job over one transport. Collectives are written once above
 * the point-to-point transports; the reduction order is fixed, so results do not depend on
 * timing. Every collective message carries a header (sequence number, operation, element
 * count, type) that the receiver checks. Errors are sticky: after a link fails, every later
 * call returns the same status, and ddl_comm_error() names the rank, its address, the
 * operation and its size. Every collective is made by every rank, in the same order, with the
 * same count, type and operation. They return DDL_OK; DDL_EINVAL (a NULL comm or buffer, an
 * unknown type or operation, a root or peer out of range: nothing is sent); or, sticky,
 * DDL_EPEER, DDL_ETIMEDOUT, DDL_EMISMATCH, DDL_EPROTO or DDL_EIO from a link. */

enum { DDL_FLOAT32 = 0, DDL_INT64 = 1 };           /* element types */
enum { DDL_SUM = 0, DDL_MEAN = 1, DDL_MAX = 2 };   /* reduction operations */
/* gradient compression: the 16 bits of ddl_comm_allreduce_compressed's messages */
enum { DDL_COMPRESS_NONE = 0, DDL_COMPRESS_BF16 = 1, DDL_COMPRESS_FP16 = 2 };
/* All-reduce algorithms of more than 64 KiB (smaller ones always go by recursive doubling):
 * AUTO (the default): in a world of a power-of-two size, recursive halving and doubling, which
 * adds in the same tree order as recursive doubling ((x0 + x1) + (x2 + x3)) + ..., neighbours
 * first), so that every size, path and transport adds alike; when ranks share hosts (tcp, zmq;
 * >= 2 hosts of 2^a consecutive ranks, 2^b hosts, known from local_rank and where the ranks run)
 * the same levels go by the two-level all-reduce, a host's levels over shared memory and one
 * stream per local rank across hosts, with the same bits as one host. Other world sizes: the
 * ring (each rank sends and receives 2 (n - 1) / n of the vector). RING: the ring at every world
 * size (its own order). PS: a synchronous parameter server (rank 0 receives every rank's vector,
 * adds them in rank order and sends the sum back: (n - 1) vectors in and out of one rank, for
 * comparison with the systems built on it). HIER: as AUTO, and on hosts that are not powers of
 * two (>= 2 hosts of the same number >= 2 of ranks) the two-level all-reduce by rings (a
 * reduce-scatter over shared memory inside each host, an all-reduce across hosts per local
 * rank, an all-gather inside the host), whose bits are not the flat all-reduce's (a warning in
 * the log when the hosts do not fit at all). Each gives the same bits on every rank, transport
 * and run. */
enum { DDL_ALGO_AUTO = 0, DDL_ALGO_RING = 1, DDL_ALGO_PS = 2, DDL_ALGO_HIER = 3 };

typedef struct ddl_comm_config {
    const ddl_transport *transport; /* NULL: shm when all ranks share this host, else tcp */
    int rank, world_size;           /* 0 <= rank < world_size */
    int local_rank, local_size;     /* position among the ranks of this host */
    const char *master;             /* "host:port" of the rendezvous at rank 0, or NULL */
    const char *peers;              /* "h:p,h:p,..." every rank's address in rank order, or NULL */
    const char *job;                /* job id: names shm segments, checked in handshakes; NULL:
                                     * over shm one job at a time per user and host (a second
                                     * fails with DDL_EAUTH) */
    const char *token;              /* shared secret (16 bytes or more); tcp and zmq need one, see insecure */
    int timeout_ms;                 /* limit of every blocking wait, in ms (0: 60000) */
    ddl_log_fn log;                 /* optional */
    void *log_ud;
    int native_allreduce;           /* 1: float32 sums use the transport's own all-reduce where it has
                                     * one (mpi, shm); 0: ddl's collectives, bit-identical everywhere */
    int insecure;                   /* 1: tcp and zmq may run a multi-rank job without a token (anyone who
                                     * reaches its ports could join); 0: they refuse (DDL_EINVAL) */
    int heartbeat_timeout_ms;       /* > 0: the comm starts one thread that sends a heartbeat (a UDP
                                     * datagram, MAC'd with the token) to every rank each
                                     * heartbeat_interval_ms and names a rank not heard from for this
                                     * long (DDL_ETIMEDOUT); 0: no thread, no heartbeats */
    int heartbeat_interval_ms;      /* 0: a fifth of heartbeat_timeout_ms */
    int mac;                        /* 1: tcp and zmq put a Poly1305 MAC (keyed by the token and the
                                     * handshake) on every message, so a relay between ranks cannot
                                     * alter one unseen; every rank must agree. Needs libsodium and a
                                     * token. 0: no MAC (the handshake still authenticates) */
    int compress;                   /* DDL_COMPRESS_*: what ddl_comm_allreduce_compressed sends (the
                                     * trainer's gradients); every rank must agree (DDL_EMISMATCH) */
    int algo;                       /* DDL_ALGO_*: how large all-reduces go (DDL_ALGO); every rank
                                     * must agree (a mismatch is DDL_EMISMATCH) */
    /* Elastic mode (DDL_ELASTIC=MIN:MAX), over shm, tcp and zmq with heartbeats on: after a
     * failure, ddl_comm_regroup lets the ranks that live go on in the same processes, as long as
     * at least elastic_min of them do. elastic_max (>= world_size, at most 256) is the most ranks
     * the job will have, and sizes the comm. 0: not elastic (a failure ends the job). */
    int elastic_min, elastic_max;
    int join;                       /* elastic, with peers and the job's token (a job without one admits
                                     * nobody: DDL_EINVAL): this process replaces slot `rank` (a rank the
                                     * job lost): ddl_comm_create asks the running ranks in and returns
                                     * once they admit it, at their next step (DDL_JOIN=1); world_size is
                                     * the job's first one */
} ddl_comm_config;

/* ddl_comm_env: the text ddl_comm_config_from_env builds from the environment, which the
 * config's strings then point into: a Slurm job id, torchrun's "MASTER_ADDR:MASTER_PORT",
 * TF_CONFIG's peers. The caller keeps it as long as the config (copy them together). */
typedef struct ddl_comm_env {
    char job[48];
    char master[288];
    char peers[8192];
} ddl_comm_env;

/* ddl_comm_config_from_env: fill cfg from DDL_TRANSPORT, DDL_RANK, DDL_WORLD_SIZE,
 * DDL_LOCAL_RANK, DDL_LOCAL_SIZE, DDL_MASTER, DDL_PEERS, DDL_JOB, DDL_TOKEN, DDL_TIMEOUT_MS,
 * DDL_NATIVE_ALLREDUCE (or its older name DDL_MPI_NATIVE), DDL_INSECURE, DDL_HEARTBEAT_TIMEOUT_MS
 * (default 5000; 0: off), DDL_HEARTBEAT_INTERVAL_MS (default 1000), DDL_MAC, DDL_COMPRESS
 * (none, bf16 or fp16), DDL_ALGO, DDL_ELASTIC, DDL_JOIN, and OMPI_COMM_WORLD_*, PMI_*,
 * SLURM_PROCID/SLURM_NTASKS/SLURM_LOCALID (and under srun, unless DDL_MASTER says otherwise, the
 * master from the step's node list and job and step ids, the local size from
 * SLURM_STEP_TASKS_PER_NODE and SLURM_NODEID); torchrun's RANK, WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE,
 * MASTER_ADDR and MASTER_PORT (as master) and TORCHELASTIC_RUN_ID (as job), read instead when no
 * DDL_RANK or DDL_WORLD_SIZE is set and torchrun started the process (or no MPI or Slurm rank is
 * set either); TensorFlow's TF_CONFIG (its cluster's chief and worker addresses as peers, in
 * env->peers, task.type and task.index as the rank: the chief, or worker 0 without one, is
 * rank 0; the ranks whose address has this rank's host as local ones), read instead when no
 * DDL_RANK, DDL_WORLD_SIZE, DDL_PEERS or DDL_MASTER is set and no MPI, Slurm or torchrun rank
 * either; the transport, unless DDL_TRANSPORT names one, is mpi under mpirun,
 * else as for a NULL transport. With none set: rank 0 of 1. The strings point into the
 * environment or into env (the master under torchrun or Slurm, TF_CONFIG's peers, Slurm's job
 * id); env may be NULL where none of those is set (else DDL_EINVAL names the one that needs it).
 * The trainer's own variables (DDL_OVERLAP, DDL_BUCKET_KB) are ddl_train_config_from_env's.
 * Returns DDL_OK; DDL_EINVAL (a bad value, named in err); DDL_ENOTSUP (the transport is not
 * compiled in). */
int ddl_comm_config_from_env(ddl_comm_config *cfg, ddl_comm_env *env, char *err, size_t err_bytes);

/* ddl_comm_create: connect to the other ranks (blocks up to timeout_ms). Returns DDL_OK with
 * *out set; or, with *out NULL and the reason in err (rank, transport, peer and what went
 * wrong): DDL_EINVAL (bad configuration), DDL_ENOTSUP (transport not compiled in), DDL_ENOMEM,
 * DDL_EIO (cannot bind or connect), DDL_ETIMEDOUT (a rank did not come in time), DDL_EAUTH (a
 * peer of another job, world size or token; over shm also a segment of another user or not
 * mode 0600, or one held by a running job of the same id), DDL_EPEER or DDL_EPROTO. */
int ddl_comm_create(const ddl_comm_config *cfg, const ddl_allocator *alloc, ddl_comm **out, char *err,
                    size_t err_bytes);
/* ddl_comm_destroy: close every link and free the comm (NULL is allowed). */
void ddl_comm_destroy(ddl_comm *c);

/* Getters; a NULL comm is one process: rank 0 of 1, transport "none". */
int ddl_comm_rank(const ddl_comm *c);
int ddl_comm_size(const ddl_comm *c);
/* ddl_comm_transport_name: "shm", "tcp", "zmq", "mpi" or "none". */
const char *ddl_comm_transport_name(const ddl_comm *c);
/* ddl_comm_error: the detail of the first failure, "" if none. Owned by the comm. */
const char *ddl_comm_error(const ddl_comm *c);

/* ddl_comm_allreduce: reduce `count` elements of `dtype` in place across all ranks with op.
 * DDL_MEAN is only for DDL_FLOAT32. */
int ddl_comm_allreduce(ddl_comm *c, void *buf, size_t count, int dtype, int op);
/* ddl_comm_allreduce_compressed: DDL_SUM or DDL_MEAN of count float32 in place, with every
 * message in the 16 bits of the comm's compress setting (half the bytes of float32): partial sums
 * are rounded before they are sent and added in float32 in a fixed order, and every rank ends with
 * the same values. residual (count floats, zero at first, kept by the caller between calls; NULL:
 * none) is error feedback: the rounding errors this rank makes go there and are added to buf on
 * the next call, so they are delayed, not lost. With DDL_COMPRESS_NONE, one rank, or count below
 * the world size it is ddl_comm_allreduce (float32, residual untouched). On every transport alike
 * (it pays on networks: over shm the conversions cost more than the bytes saved). */
int ddl_comm_allreduce_compressed(ddl_comm *c, float *buf, size_t count, int op, float *residual);
/* ddl_comm_compression: the comm's DDL_COMPRESS_* (NULL: none). */
int ddl_comm_compression(const ddl_comm *c);
/* ddl_comm_broadcast: copy `count` elements from root's buf to every rank's buf. */
int ddl_comm_broadcast(ddl_comm *c, void *buf, size_t count, int dtype, int root);
/* ddl_comm_allgather: recv (world_size * count elements) = every rank's send, in rank order. */
int ddl_comm_allgather(ddl_comm *c, const void *send, void *recv, size_t count, int dtype);
/* ddl_comm_barrier: return when every rank has entered it. */
int ddl_comm_barrier(ddl_comm *c);
/* ddl_comm_send / ddl_comm_recv: point-to-point, ordered per pair of ranks; the receiver must
 * expect the same tag and size, or both get DDL_EMISMATCH. Returns as the collectives. */
int ddl_comm_send(ddl_comm *c, int peer, int tag, const void *buf, size_t bytes);
int ddl_comm_recv(ddl_comm *c, int peer, int tag, void *buf, size_t bytes);
/* ---- elastic membership ----
 * After a collective fails on an elastic comm (a rank died, was named silent, or another rank
 * began regrouping), every rank that lives calls ddl_comm_regroup with the number of steps it
 * has completed. The ranks agree (over the heartbeats' authenticated datagrams, within the comm's
 * timeout) on who lives and on the highest step any of them completed, then reopen their links
 * among themselves in the same comm: new rank numbers (in the old order), a new world size. A
 * rank is left out when it is dead (its process gone, where its pid can be seen), or named by a
 * failed call and silent since, or silent for the heartbeat timeout. The comm keeps its token (one
 * created without a token draws a random secret at creation and shares it over its links: its
 * heartbeats and join notes rest on it, and no process outside is admitted); its job id gets a
 * generation suffix and an HMAC of it keyed by the token, so nothing of the old links is mistaken
 * for the new and no other user can foresee the next generation's names. */
typedef struct ddl_regroup {
    int old_rank, old_world;   /* before */
    int rank, world;           /* now */
    int generation;            /* regroups so far, this one included */
    long step;                 /* the highest step a survivor completed */
    int leader;                /* the lowest new rank that completed it */
    int behind;                /* survivors that did not: the caller sends them the leader's state */
    int lost[8];               /* the first old ranks left out (-1 past the last) */
    int n_lost;
    double ms;                 /* from the call until the new links were up */
    char why[256];             /* the failure that began it, as this rank saw it */
    int below_min;             /* 1: this rank lives but fewer than elastic_min do, and the call
                                * failed: rank, world, step and leader say how the job would have
                                * gone on (the leader holds the newest state) */
} ddl_regroup;
/* ddl_comm_regroup: as above. DDL_OK with *out filled; DDL_EINVAL (not elastic); DDL_EPEER (this
 * rank was left out, or fewer than elastic_min ranks live: the comm is then closed);
 * DDL_ETIMEDOUT (no agreement in time). The message is in ddl_comm_error. Collective over the
 * ranks that live. */
int ddl_comm_regroup(ddl_comm *c, long step, ddl_regroup *out);
/* ddl_comm_joined: 1 if c was created by joining a running job (ddl_comm_config.join), with *out
 * saying how (step, leader: the rank whose state the joiner takes; rank, world); else 0. A
 * joiner's ddl_comm_create returns at once, before it asks the job in: it asks here, or at its
 * first call, so that it loads its data and builds its model while the job runs on; until then
 * ddl_comm_rank and ddl_comm_size say its slot and the most ranks. If asking fails, the comm's
 * first call returns the failure (ddl_comm_error says it). */
int ddl_comm_joined(ddl_comm *c, ddl_regroup *out);
/* ddl_comm_elastic_min, _max: the configuration's (0 when not elastic). */
int ddl_comm_elastic_min(const ddl_comm *c);
int ddl_comm_elastic_max(const ddl_comm *c);

/* ddl_comm_allreduce_shards: the float32 sum of `total` vectors of count elements ("virtual
 * shards": the parts of a global batch in elastic training), each rank holding a contiguous block
 * of them in rank order: shards first .. first + n - 1 at bufs[0 .. n) (rank 0's block starts at
 * 0, each next rank's where the last ended, the last rank's ends at total). Every element is
 * added in the order an all-reduce of `total` ranks adds it (DDL_ALGO auto: the tree for a power
 * of two, else the ring), so the sums are the same bits however the shards are dealt: one rank
 * holding all of them, or any number of ranks holding blocks. On
 * return every bufs[i] holds the sum. Collective (every rank calls it, with the same total and
 * count); c NULL: one process, holding every shard. Returns DDL_OK, DDL_EINVAL (n < 1, total outside 1..DDL_MAX_SHARDS, NULL vectors, or
 * blocks that do not tile 0..total - 1: every rank gets it), or the comm's error. */
#define DDL_MAX_SHARDS 4096
int ddl_comm_allreduce_shards(ddl_comm *c, float *const *bufs, int first, int n, int total, size_t count);
/* ddl_comm_set_native: as ddl_comm_config.native_allreduce, after creation. */
void ddl_comm_set_native(ddl_comm *c, int on);

/* Getters of the built-in transports; a transport compiled out returns NULL.
 * ddl_transport_find: look one up by name ("shm", "tcp", "zmq", "mpi"); NULL if unknown or
 * compiled out. The first zmq comm of a process with glibc raises malloc's mmap threshold to
 * 16 MiB and its trim threshold to 64 MiB (mallopt), so that libzmq's per-message buffers are
 * reused instead of faulted in anew for each message; not when the environment sets
 * GLIBC_TUNABLES, MALLOC_MMAP_THRESHOLD_ or MALLOC_TRIM_THRESHOLD_. */
const ddl_transport *ddl_transport_shm(void);
const ddl_transport *ddl_transport_tcp(void);
const ddl_transport *ddl_transport_zmq(void);
const ddl_transport *ddl_transport_mpi(void);
const ddl_transport *ddl_transport_find(const char *name);

/* ---- checkpoints ----
 * A checkpoint file holds everything a run needs to continue exactly where it stopped: model
 * name and shape signature (CRC-32C of every tensor's name and shape), step, epoch, data
 * position, world size, every rank's dropout RNG state, optimizer kind, settings and state,
 * weights and the input normalisation. Layout (little endian): a 32-byte header (magic
 * "DDLCKPT", format version, section count, CRC-32C), then sections META, TENS (tensor table),
 * RNGS, WGTS (weights), OPTS (optimizer state), each with a 32-byte header (id, flags, raw and
 * stored length, CRC-32C of the stored bytes and of the header) and its bytes, lz4-compressed
 * when ddl is built with lz4 (WITH_LZ4=1) and that makes them smaller, else stored as they are.
 * A checkpoint is written to PATH.tmp, flushed to disk (fsync), renamed over PATH and the
 * directory is synced: a crash at any moment leaves either the old or the new file, and a
 * leftover PATH.tmp is ignored and replaced by the next save. The name PATH.tmp is the save's:
 * whatever is there (a file, a symlink, a hard link) is unlinked and a new file created in its
 * place, so nothing is ever written through a link planted there.
 *
 * Exact resume: the data position is global (samples of the epoch consumed over all ranks)
 * and the shuffle depends only on the seed and the epoch, so a run resumed on a different
 * number of ranks re-shards the rest of the epoch by itself; with the same world size, seed,
 * batch and data it continues bit-identically (same weights as a run never stopped). */

#define DDL_CHECKPOINT_VERSION 1 /* format version written; files of other versions are refused */

typedef struct ddl_checkpoint_info {
    int version;                /* format version of the file */
    int compressed;             /* written with lz4: sections compressed where it made them smaller */
    char model[48];             /* model plugin name, "lenet" */
    uint32_t signature;         /* CRC-32C of every tensor's name and shape (ddl_model_signature) */
    ddl_model_config model_cfg; /* the configuration the model was built with */
    int n_tensors;
    size_t n_params;            /* floats of weights */
    size_t n_optim;             /* floats of optimizer state */
    ddl_optim_config optim;     /* optimizer kind and settings */
    int64_t step;               /* optimizer steps done */
    int epoch;                  /* epoch in progress, from 0 */
    int64_t pos;                /* samples of that epoch consumed, over all ranks */
    int64_t n_train;            /* samples per epoch */
    int batch;                  /* global batch */
    uint64_t seed;              /* ddl_train_config.seed */
    int world_size;             /* ranks that wrote it (one RNG state each) */
    float mean, std;            /* input normalisation (ddl_model_set_norm) */
    int n_norm;                 /* > 0: per channel instead (ddl_model_set_norm_channels): */
    float norm_mean[DDL_MAX_NORM_CHANNELS], norm_std[DDL_MAX_NORM_CHANNELS];
    uint64_t file_bytes;
} ddl_checkpoint_info;

/* ddl_checkpoint_open: read and verify a whole checkpoint file: header, every section's CRC,
 * every length against the file size before anything is allocated, the tensor table against
 * the signature. Memory comes from alloc (NULL: malloc) and goes with ddl_checkpoint_close;
 * a section is given its buffer only once its bytes are read and checked (for lz4, once they
 * are found to decode to the length it claims), so a file that lies about its lengths is
 * refused having allocated no more than its own size.
 * Returns DDL_OK, DDL_EIO (cannot open or read, a directory or another file that is not a
 * regular one, such as a FIFO), DDL_ECORRUPT (truncated, bad
 * CRC, bad magic or version, inconsistent lengths), DDL_ENOTSUP (compressed but ddl built
 * without lz4) or DDL_ENOMEM; err names the file and what was expected and found. */
int ddl_checkpoint_open(const char *path, const ddl_allocator *alloc, ddl_checkpoint **out, char *err,
                        size_t err_bytes);
/* ddl_checkpoint_close: free a checkpoint (NULL is allowed). */
void ddl_checkpoint_close(ddl_checkpoint *ck);
/* Getters; the memory belongs to the checkpoint. ddl_checkpoint_tensor: NULL when i is out of
 * range; offset and count index ddl_checkpoint_params. */
const ddl_checkpoint_info *ddl_checkpoint_get_info(const ddl_checkpoint *ck);
const ddl_param_info *ddl_checkpoint_tensor(const ddl_checkpoint *ck, int i);
const float *ddl_checkpoint_params(const ddl_checkpoint *ck);
const float *ddl_checkpoint_optim_state(const ddl_checkpoint *ck);
/* ddl_checkpoint_arch: the text of the layer graph the model was built from (ddl_model_describe
 * at save time: graphs, and the built-in plugins), or NULL. ddl_checkpoint_class_names: the
 * class names of the training data (image folders: model_cfg.n_classes of them), or NULL.
 * Owned by the checkpoint. */
const char *ddl_checkpoint_arch(const ddl_checkpoint *ck);
/* ddl_checkpoint_plugin_config: the model plugin's settings the file keeps, to build the model
 * again (ddl_model_config.plugin_config): a ddl_unet_config for unet; NULL for other plugins
 * (a graph's is ddl_checkpoint_arch's text, through ddl_graph_parse). Owned by the checkpoint:
 * info.model_cfg.plugin_config is NULL, so copies of the info point nowhere. */
const void *ddl_checkpoint_plugin_config(const ddl_checkpoint *ck);
const char *const *ddl_checkpoint_class_names(const ddl_checkpoint *ck);
/* ddl_checkpoint_check_model: DDL_OK if the checkpoint's weights fit m (name, tensor names and
 * shapes), else DDL_EINVAL with the first difference in err. */
int ddl_checkpoint_check_model(const ddl_checkpoint *ck, const ddl_model *m, char *err, size_t err_bytes);

/* ddl_trainer_save: write a checkpoint of the trainer to path (see above). Collective: every
 * rank calls it at the same step, not rank 0 alone as with torch.save (the other ranks send
 * their RNG state); rank 0 writes the file, and every rank returns rank 0's status. Called on
 * some ranks only, it fails within the comm's timeout with an error that says so
 * ("ddl_trainer_save is collective: every rank must call it ..."). Rank 0 allocates the file image (about the size of weights plus optimizer state)
 * through the trainer's allocator for the duration of the call; other ranks allocate nothing,
 * and nothing is allocated per training step. Returns DDL_OK, DDL_EIO (cannot write, fsync or
 * rename; ddl_trainer_error says which and why), DDL_ENOMEM, or a comm error. */
int ddl_trainer_save(ddl_trainer *t, const char *path);
/* ddl_trainer_save_background: the same save with the file written off the training thread:
 * the state of this step is encoded into a file image at once (rank 0 blocks for that copy, not
 * for the disk: U-Net's save, measured in tests/test_ckpt_async.c), and a thread of the
 * trainer's writes it as ddl_trainer_save would (atomically). One write at a time: a save that
 * finds the previous write still going waits for it (up to 600 s, then DDL_ETIMEDOUT), and a
 * failed write is returned by the next save, ddl_trainer_save_wait or ddl_trainer_save, whichever
 * comes first (then that save is not made). The image buffer (weights, buffers, optimizer state)
 * is allocated at the first call and kept until ddl_trainer_destroy, which waits for a write in
 * flight. ddl_trainer_save_wait: collective; waits until no write is in flight and returns its
 * status on every rank (call it before reading the file, and before exiting). ddl_trainer_save
 * waits for a background write first. */
int ddl_trainer_save_background(ddl_trainer *t, const char *path);
int ddl_trainer_save_wait(ddl_trainer *t);
/* ddl_trainer_save_pending: not collective, never blocks: on rank 0, 1 while a background write
 * is in flight, then 0 once it is on disk (or its error, negative); 0 on the other ranks. */
int ddl_trainer_save_pending(const ddl_trainer *t);

#define DDL_RESUME_IF_EXISTS 1 /* ddl_trainer_resume: a missing file is not an error */

/* ddl_trainer_resume: continue from the checkpoint at path. Collective: rank 0 reads and
 * verifies it (model and optimizer must match the trainer's, as must the samples per epoch),
 * then broadcasts weights, optimizer state, normalisation, step, epoch, data position and RNG
 * states to every rank. On another world size it still resumes: the rest of the epoch is
 * re-sharded (see above), each rank r takes the RNG state of saved rank r % saved world, and a
 * warning is logged. With DDL_RESUME_IF_EXISTS in flags, a path that does not exist on rank 0
 * leaves the trainer as it is. *saved_world (may be NULL) gets the checkpoint's world size, or 0
 * when nothing was resumed. On failure the trainer is unchanged and every rank returns the same
 * status: DDL_EIO, DDL_ECORRUPT, DDL_ENOTSUP, DDL_ENOMEM (as ddl_checkpoint_open), DDL_EINVAL
 * (checkpoint of another model, optimizer or data set), or a comm error; ddl_trainer_error on
 * rank 0 has the detail. */
int ddl_trainer_resume(ddl_trainer *t, const char *path, int flags, int *saved_world);

/* ---- watching a run: TensorBoard event files and a timeline ----
 * What a program needs to show a run as TensorFlow users see theirs. Neither object prints or
 * reads the environment: the program decides what to record, when, and where (examples/lenet.c
 * with --logdir and DDL_TIMELINE is one such program). */

typedef struct ddl_summary_writer ddl_summary_writer;

/* ddl_summary_writer_create: start a TensorBoard event file in dir (created if missing, one
 * level): dir/events.out.tfevents.<seconds>.<host>.<pid>, as TensorFlow names them, in
 * TensorFlow's TFRecord framing (length, masked CRC-32C of the length, the Event, masked
 * CRC-32C of the Event). Its first Event, written at once, holds file_version "brain.Event:2".
 * Records wait in a 64 KiB buffer, allocated here with the writer, and go to the file when it
 * fills, at ddl_summary_writer_flush, and with the first record 5 s after the last flush.
 * Returns DDL_OK with *out set; or, with *out NULL and the reason in err: DDL_EINVAL (no dir),
 * DDL_EIO (cannot create the directory or the file), DDL_ENOMEM. */
int ddl_summary_writer_create(const char *dir, const ddl_allocator *alloc, ddl_summary_writer **out, char *err,
                              size_t err_bytes);
/* ddl_summary_writer_scalar: record value (kept as float32) under tag ("train/loss", 1 to 256
 * bytes) at step, with the wall time now: an Event with a Summary of one simple_value.
 * Allocates nothing. Returns DDL_OK, DDL_EINVAL (bad tag), or DDL_EIO when a write to the file
 * failed (now or before: a failure is sticky, nothing more is written, and the file is cut
 * back to its last whole record, so every record in it stays readable). */
int ddl_summary_writer_scalar(ddl_summary_writer *w, const char *tag, int64_t step, double value);
/* ddl_summary_writer_image: record an image under tag at step: pixels (height, width,
 * channels) of uint8, channels 1 (grey), 2 (grey, alpha), 3 (RGB) or 4 (RGBA), encoded as PNG
 * (libpng; the PNG is allocated through the writer's allocator for the call). Returns as
 * ddl_summary_writer_scalar, and DDL_EINVAL (bad size: 1 to 16384 pixels a side), DDL_ENOMEM,
 * DDL_ENOTSUP (ddl built with WITH_PNG=0). */
int ddl_summary_writer_image(ddl_summary_writer *w, const char *tag, int64_t step, const uint8_t *pixels,
                             int height, int width, int channels);
/* ddl_summary_writer_flush: write what waits to the file. Returns DDL_OK or DDL_EIO (sticky). */
int ddl_summary_writer_flush(ddl_summary_writer *w);
/* ddl_summary_writer_destroy: flush, close and free (NULL is allowed). */
void ddl_summary_writer_destroy(ddl_summary_writer *w);
/* Getters: the file's path; the detail of the last failure ("" if none); bytes written or
 * waiting. The strings belong to the writer. */
const char *ddl_summary_writer_path(const ddl_summary_writer *w);
const char *ddl_summary_writer_error(const ddl_summary_writer *w);
uint64_t ddl_summary_writer_bytes(const ddl_summary_writer *w);

/* A timeline records spans of time on each rank and writes them all, at the end, as one Chrome
 * trace-event JSON file (open it in Perfetto or chrome://tracing): a track per rank. Values
 * are only ever appended. */
enum {
    DDL_SPAN_DATA = 0,       /* shuffling, gathering and normalising a batch */
    DDL_SPAN_FORWARD = 1,    /* forward pass and loss (with micro-batches: the first part's) */
    DDL_SPAN_BACKWARD = 2,   /* backward pass (with micro-batches: the rest of every part, and
                              * adding their gradients) */
    DDL_SPAN_ALLREDUCE = 3,  /* gradient all-reduce (with its bytes) */
    DDL_SPAN_OPTIMIZER = 4,  /* optimizer step */
    DDL_SPAN_WAIT = 5,       /* in an all-reduce, waiting for the last rank to enter it (derived by
                              * ddl_timeline_write, not recorded) */
    DDL_SPAN_EVALUATE = 6,
    DDL_SPAN_CHECKPOINT = 7,
    DDL_SPAN_USER = 8,       /* anything of the caller's */
    DDL_SPAN_REGROUP = 9     /* elastic: from the failed call to the new membership; its "bytes"
                              * are the world size after (written as "world") */
};

typedef struct ddl_timeline_config {
    long first_step, last_step; /* record spans of these steps only (counted as
                                 * ddl_trainer_step_count after the step: from 1); last 0: no end */
    size_t max_spans;           /* spans this rank keeps (32 bytes each, allocated at creation);
                                 * later ones are counted, not kept. A training step makes 5. */
} ddl_timeline_config;

/* ddl_timeline_create: a timeline for this rank. Returns DDL_OK with *out set; or, with *out
 * NULL and the reason in err: DDL_EINVAL (max_spans 0 or above 2^32, steps out of order),
 * DDL_ENOMEM. */
int ddl_timeline_create(const ddl_timeline_config *cfg, const ddl_allocator *alloc, ddl_timeline **out,
                        char *err, size_t err_bytes);
/* ddl_timeline_destroy: free it (NULL is allowed). */
void ddl_timeline_destroy(ddl_timeline *tl);
/* ddl_timeline_now: the clock spans are measured with: monotonic nanoseconds. */
int64_t ddl_timeline_now(void);
/* ddl_timeline_wants: 1 when tl is not NULL and step is in its range, else 0. */
int ddl_timeline_wants(const ddl_timeline *tl, long step);
/* ddl_timeline_span: record that this rank spent [t0, t1] (ddl_timeline_now) on kind
 * (DDL_SPAN_*) during step, moving `bytes` bytes (0 if none). Nothing happens when tl is NULL
 * or the step is out of range; a full timeline counts the span as dropped. Allocates nothing,
 * never fails. */
void ddl_timeline_span(ddl_timeline *tl, int kind, long step, int64_t t0, int64_t t1, uint64_t bytes);
/* ddl_timeline_count / _dropped: spans kept, and spans that found the timeline full. */
size_t ddl_timeline_count(const ddl_timeline *tl);
size_t ddl_timeline_dropped(const ddl_timeline *tl);
/* ddl_timeline_write: collective over comm (NULL: one process): every rank sends its spans to
 * rank 0, which aligns every rank's clock to its own (the fastest of 8 round trips, as NTP
 * does), adds the waits in all-reduces (DDL_SPAN_WAIT: from a rank's entry to the last
 * rank's), and writes path (through path.tmp and a rename). Rank 0 allocates room for every
 * rank's spans for the call. Returns DDL_OK; DDL_EINVAL (no path), DDL_ENOMEM (on any rank:
 * all return it), DDL_EIO (rank 0 cannot write the file: only rank 0 returns it), or a comm
 * error; err says why. The timeline stays as it was. */
int ddl_timeline_write(ddl_timeline *tl, ddl_comm *comm, const char *path, char *err, size_t err_bytes);

/* ---- inference and export ----
 * A trained model used outside training. A predictor is a model loaded from a checkpoint (or an
 * ONNX file) for inference only: no trainer, no optimizer state (the file's is read to check its
 * CRC, then dropped). ddl_predictor_open allocates everything; ddl_predictor_run allocates nothing, so
 * a predictor can serve any number of batches in fixed memory. An exporter writes a
 * checkpoint's model in a format other tools read: numpy's .npz, or ONNX for any ONNX
 * runtime. */


typedef struct ddl_predict_config {
    int batch;                      /* most images per forward pass (0: 64) */
    const ddl_model_plugin *plugin; /* the model the checkpoint must hold; NULL: the built-in
                                     * model it names (ddl_model_find), else the layer graph it
                                     * carries; ignored for an ONNX file */
} ddl_predict_config;

/* ddl_predictor_open: load the checkpoint at path (as ddl_checkpoint_open) into a model built
 * for cfg (NULL: the defaults above), memory from alloc; a path that ends in ".onnx" is an ONNX
 * file instead, imported as ddl_graph_import_onnx does (its network and weights, its input
 * scaling as the normalisation). The model's configuration and input normalisation are the
 * file's, its batch cfg->batch. Returns DDL_OK with *out set; or, with *out NULL and err naming
 * the file and what was wrong: DDL_EIO, DDL_ECORRUPT, DDL_ENOTSUP (as ddl_checkpoint_open;
 * DDL_ECORRUPT also for a graph checkpoint whose layer graph is missing or does not read),
 * DDL_EINVAL (a checkpoint of another model than cfg->plugin, of a model this ddl does not have
 * and that carries no layer graph, of tensors that do not fit it, or of weights that are not all
 * finite: a run that diverged; batch < 0), DDL_ENOMEM; for an ONNX file, ddl_graph_import_onnx's
 * codes, and DDL_EINVAL for an output of other than 2 to DDL_MAX_CLASSES channels. */
int ddl_predictor_open(const char *path, const ddl_predict_config *cfg, const ddl_allocator *alloc,
                       ddl_predictor **out, char *err, size_t err_bytes);
/* ddl_predictor_close: free the predictor (NULL is allowed). */
void ddl_predictor_close(ddl_predictor *p);
/* ddl_predictor_model: the model (name, configuration, output shape, weights); owned by p. */
const ddl_model *ddl_predictor_model(const ddl_predictor *p);
/* ddl_predictor_info: what the checkpoint said of its run (step, epoch, seed, world size). */
const ddl_checkpoint_info *ddl_predictor_info(const ddl_predictor *p);
/* ddl_predictor_run: predict n images (n, c, h, w) of raw uint8 pixels, normalised as in
 * training, in forward passes of cfg.batch images: images [0, batch) form the first, and so
 * on. Outputs, each optional (NULL), are caller memory: logits and probs (n, C, H, W) floats
 * (softmax over C), classes (n, H, W) the class of each output position (ties: the lowest).
 * With (C, H, W) the model's output shape: (classes, 1, 1) for a classifier. A pass gives the
 * same bits for the same images on every run, so a caller that splits work on multiples of
 * batch gets the results of one caller. Returns DDL_OK, or DDL_EINVAL (n < 0, NULL images with
 * n > 0, or an image shape other than the model's input: ddl_predictor_error says both). */
int ddl_predictor_run(ddl_predictor *p, const uint8_t *images, int n, int c, int h, int w, float *logits,
                      float *probs, uint16_t *classes);
/* ddl_predictor_run_float: the same for float pixels on the scale of a byte / 255, as a model
 * trained on a data set's fimages takes them (pre-normalised arrays as they were trained). */
int ddl_predictor_run_float(ddl_predictor *p, const float *images, int n, int c, int h, int w, float *logits,
                            float *probs, uint16_t *classes);
/* ddl_predictor_error: the detail of the last failure ("" if none); owned by p. */
const char *ddl_predictor_error(const ddl_predictor *p);
/* ddl_predictor_class_names: the class names the checkpoint carries (n_classes), or NULL. */
const char *const *ddl_predictor_class_names(const ddl_predictor *p);

/* ddl_export: write the model of ck (weights and input normalisation) to path in the format its
 * extension names: ".npz" (ddl_export_npz) or ".onnx" (ddl_export_onnx). Returns as they do,
 * and DDL_ENOTSUP for another extension (err lists the ones known); nothing is written then. */
int ddl_export(const ddl_checkpoint *ck, const char *path, const ddl_allocator *alloc, char *err,
               size_t err_bytes);
/* ddl_export_npz: numpy .npz (a zip of stored .npy files, float32 little endian) with PyTorch's
 * names and layouts ("conv1.weight" (6, 1, 5, 5), ...) plus the scalars input_mean and input_std.
 * Every tensor name must be letters, digits, '_' and '.', none twice nor input_mean or
 * input_std, else DDL_EINVAL naming it and nothing is written. Returns DDL_OK, DDL_EINVAL,
 * DDL_EIO (cannot write path; a partial file is removed), DDL_ENOMEM. */
int ddl_export_npz(const ddl_checkpoint *ck, const char *path, const ddl_allocator *alloc, char *err,
                   size_t err_bytes);
/* ddl_export_onnx: an ONNX model (IR version 7, opset 13) of a checkpoint that carries its
 * layer graph (a graph model, or a plugin with describe()), or of a lenet or unet checkpoint
 * written before checkpoints carried one (their presets build it): input "pixels" (N, in_c,
 * in_h, in_w) float raw pixels 0..255 (the normalisation is in the graph), output "logits"
 * (N, C) where the output is 1x1 (a classifier), else (N, C, H, W); N is free. Weights are
 * initializers with the model's names (PyTorch's for lenet and unet; GroupNorm's weight and bias
 * shaped (C, 1, 1)); the class names, if any, are the metadata "ddl.class_names". Returns DDL_OK,
 * DDL_ENOTSUP (a checkpoint with no layer graph of another model), DDL_ECORRUPT (a layer graph
 * that does not read), DDL_EINVAL (tensors that do not fit the graph, a layer the exporter does
 * not know), DDL_EIO (cannot write path; a partial file is removed), DDL_ENOMEM. */
int ddl_export_onnx(const ddl_checkpoint *ck, const char *path, const ddl_allocator *alloc, char *err,
                    size_t err_bytes);

/* ---- model plugin interface ----
 * Bring your own model: fill a static const ddl_model_plugin and pass it to ddl_model_create
 * (examples/custom_model.c is a whole one). A plugin describes its parameters and activations in
 * build(), which the core calls twice: first to measure (every pointer it gets is NULL), then for
 * real. It must therefore only store the pointers it gets in build(), never use them there. The
 * trainer may build more copies of it (micro-batches) and run them at once on other threads: its
 * forward must depend only on its parameters and input, and it must keep no state outside self. */

enum { DDL_INIT_ZERO = 0, DDL_INIT_HE = 1, DDL_INIT_GLOROT = 2, DDL_INIT_ONE = 3, DDL_INIT_TORCH = 4 };

struct ddl_param_info {
    const char *name;   /* PyTorch's name: "conv1.weight" */
    int n_dims;
    int shape[4];
    size_t offset;      /* in floats, into ddl_model_params() */
    size_t count;
    int init;           /* DDL_INIT_* */
    int fan_in, fan_out;
};

#define DDL_MAX_PARAMS 1024 /* parameter tensors per model */

typedef struct ddl_model_build ddl_model_build;

/* ddl_build_param: declare a parameter tensor; *grad receives its gradient view (may be NULL).
 * Returns its view in the flat parameter buffer (NULL while measuring). n_dims outside 1..4,
 * a name of more than 47 bytes or more than DDL_MAX_PARAMS tensors make the build fail
 * (DDL_EINVAL, with the reason). */
float *ddl_build_param(ddl_model_build *b, const char *name, int n_dims, const int *shape, int init, int fan_in,
                       int fan_out, float **grad);
/* ddl_build_scratch: floats of activation memory for the plugin's own use (NULL while measuring). */
float *ddl_build_scratch(ddl_model_build *b, size_t count);
/* ddl_build_output: declare the logits shape per sample (classes, H, W); (C, 1, 1) for classifiers. */
void ddl_build_output(ddl_model_build *b, int c, int h, int w);
/* ddl_backward_ready: for model plugins, inside backward (version 2): every gradient from
 * `from` (a gradient view the build gave) to the end of the flat gradient buffer is final for
 * this pass. Plugins call it after each layer, last layers first, so the trainer can all-reduce
 * those gradients while the earlier layers compute (DDL_OVERLAP); a plugin that never calls it
 * still trains, with all gradients sent after backward. pass is the one backward was given.
 * ddl_model_grads_ready: the same for a version 1 plugin, which names the pass by its state. */
typedef struct ddl_backward ddl_backward;
void ddl_backward_ready(ddl_backward *pass, const float *from);
void ddl_model_grads_ready(void *self, const float *from);
/* ddl_build_fail: report a configuration the plugin cannot build; the create call then fails
 * with DDL_EINVAL and msg as its reason. */
void ddl_build_fail(ddl_model_build *b, const char *msg);
/* ddl_build_plugin_config: the plugin's copy of its settings, in its own state (self), which the
 * built model's ddl_model_get_config then points plugin_config at; a plugin that keeps none
 * leaves it NULL there (the caller's pointer may not outlive the build). */
void ddl_build_plugin_config(ddl_model_build *b, const void *kept);

/* 2: backward takes the pass it reports to (ddl_backward_ready). Version 1 plugins, with
 * backward of four arguments and ddl_model_grads_ready, still build. */
#define DDL_MODEL_VERSION 2

struct ddl_model_plugin {
    int version;       /* DDL_MODEL_VERSION (1 still accepted) */
    const char *name;  /* "lenet" */
    size_t self_bytes; /* bytes of the plugin's own state (zeroed, DDL_ALIGN-aligned), at most 1 MiB */
    /* build: declare parameters, activations and output for cfg; DDL_OK or DDL_EINVAL. */
    int (*build)(void *self, const ddl_model_config *cfg, ddl_model_build *b);
    /* forward: logits (batch, C, H, W) of the normalised x (batch, in_c, in_h, in_w), batch <= cfg.batch;
     * keeps what backward needs in its scratch. */
    void (*forward)(void *self, const float *x, int batch, int training, ddl_rng *rng, float *logits);
    /* backward: accumulate dL/dparams into the gradient views from dlogits (batch, C, H, W),
     * telling pass which gradients are final as it goes (ddl_backward_ready). Version 1:
     * without pass (the member then has that type: cast it, or see DDL_MODEL_VERSION). */
    void (*backward)(void *self, const float *x, int batch, const float *dlogits, ddl_backward *pass);
    /* describe: optional: the model as the text of a layer graph (ddl_graph_format) that builds
     * the same parameters, so checkpoints carry it and programs without the plugin compiled in
     * can serve and export it; writes at most bytes (NUL included), returns the whole length,
     * 0 if it cannot. */
    size_t (*describe)(const void *self, char *buf, size_t bytes);
};

/* ---- transport plugin interface ----
 * A transport moves bytes between ranks; it knows nothing of gradients. The core sizes its
 * state from state_bytes() and hands the memory to open(). Every message is a fixed 32-byte
 * header (opaque to the transport) followed by a payload. All calls block at most timeout_ms.
 * Calls return DDL_OK or a DDL_E* code, with the detail for error(). Optional members may be
 * NULL. */

#define DDL_TRANSPORT_VERSION 4 /* 2 added interrupt, 3 allgather, 4 exchange_view; older transports still work */
#define DDL_HEADER_BYTES 32

struct ddl_transport {
    int version;      /* DDL_TRANSPORT_VERSION */
    const char *name; /* "shm", "tcp", ... */
    /* state_bytes: bytes of per-process and per-link state for this configuration. */
    size_t (*state_bytes)(const ddl_comm_config *cfg);
    /* open: connect to every rank that needs a link (state is zeroed, DDL_ALIGN-aligned). */
    int (*open)(void *state, const ddl_comm_config *cfg);
    /* close: release every OS resource; safe after a failed open. */
    void (*close)(void *state);
    /* exchange: at once send (send_hdr, send_buf[send_bytes]) to rank `to` and receive a message
     * from rank `from` into (recv_hdr, recv_buf[recv_bytes]). to or from may be -1 for none.
     * A message whose payload length is not recv_bytes gives DDL_EMISMATCH, with recv_hdr
     * filled, so the caller can describe both sides; sending to that peer must still work
     * afterwards (the core tells the peer about the mismatch). timeout_ms bounds the time
     * without progress: a large transfer that keeps moving may take longer. */
    int (*exchange)(void *state, int to, const void *send_hdr, const void *send_buf, size_t send_bytes,
                    int from, void *recv_hdr, void *recv_buf, size_t recv_bytes, int timeout_ms);
    /* allreduce: optional native float32 sum in place. */
    int (*allreduce)(void *state, float *buf, size_t count, int timeout_ms);
    /* error: the detail of the last failure ("rank 3 at 10.0.0.2:41234 closed the connection"). */
    const char *(*error)(const void *state);
    /* peer_address: optional: a printable address of rank r, for messages. */
    const char *(*peer_address)(const void *state, int r);
    /* interrupt: optional (version 2): called from another thread (the comm's heartbeat) when
     * rank `culprit` stopped responding. The wait in progress, and every later one, must end
     * within about 200 ms with DDL_ETIMEDOUT; close() stays safe. It may only set a flag. */
    void (*interrupt)(void *state, int culprit);
    /* allgather: optional (version 3), a latency path for small collectives where ranks share
     * memory: every rank posts (hdr, buf[bytes]) at once, bytes <= allgather_max, and gets every
     * other rank r's header copied to hdrs + r * DDL_HEADER_BYTES and views[r] pointing at its
     * payload, readable until this rank's next allgather. A rank that posted another length, or
     * that sent a point-to-point message instead, gives DDL_EMISMATCH with its header in hdrs
     * (the others' zeroed or filled). */
    int (*allgather)(void *state, const void *hdr, const void *buf, size_t bytes, void *hdrs, const void **views,
                     int timeout_ms);
    size_t allgather_max;
    /* exchange_view: optional (version 4), for a transport that receives into buffers of its own:
     * exchange() without the copy out of them. *recv_view points at the payload (recv_bytes,
     * 1 <= recv_bytes <= view_max, any alignment), readable until the next call on this state.
     * The core uses it where it only reads what it receives (the sums of allreduce). */
    int (*exchange_view)(void *state, int to, const void *send_hdr, const void *send_buf, size_t send_bytes,
                         int from, void *recv_hdr, const void **recv_view, size_t recv_bytes, int timeout_ms);
    size_t view_max;
};

/* ---- the compute core: threads, arena, random numbers, checksums ---- */

/* ddl_set_threads: threads in all for ddl's kernels (n >= 1, default 1): n - 1 workers are
 * created now and kept (parked) until the next call; matrix products and the other kernels
 * split their work over them in fixed blocks, so the results are bit-identical whatever n
 * (OpenBLAS itself then runs one thread per block). Call it at set-up, not while another
 * thread computes. The one process-wide setting. Returns the count in use (fewer when the
 * system would not create more). */
int ddl_set_threads(int n);

/* An arena: a bump allocator over caller memory. Initialised with mem == NULL it measures:
 * allocations return NULL but advance `used`, so a first pass gives the exact size for a
 * second one over memory aligned to DDL_ALIGN. */
typedef struct ddl_arena {
    unsigned char *base; /* caller memory, or NULL when measuring */
    size_t size;         /* bytes at base */
    size_t used;         /* bytes handed out so far, including alignment */
} ddl_arena;

/* ddl_arena_init: start an arena over `bytes` bytes at `mem` (mem NULL: measure pass). */
void ddl_arena_init(ddl_arena *a, void *mem, size_t bytes);
/* ddl_arena_alloc: `bytes` bytes at an address aligned to DDL_ALIGN; NULL when measuring or
 * when full (used still advances, so ddl_arena_used tells the size that was needed). */
void *ddl_arena_alloc(ddl_arena *a, size_t bytes);
/* ddl_arena_used: bytes handed out (or wanted) so far. */
size_t ddl_arena_used(const ddl_arena *a);
/* ddl_arena_ok: 1 while every allocation fitted, 0 after one did not (or when measuring). */
int ddl_arena_ok(const ddl_arena *a);

/* Random numbers: xoshiro256** seeded through splitmix64: the same seed gives the same stream
 * on every platform. The state is public so checkpoints can save it. */
struct ddl_rng {
    uint64_t s[4];
};

void ddl_rng_seed(ddl_rng *r, uint64_t seed);
uint64_t ddl_rng_next(ddl_rng *r);
/* ddl_rng_uniform: a float in [0, 1). */
float ddl_rng_uniform(ddl_rng *r);
/* ddl_rng_normal: a standard normal float (Box-Muller). */
float ddl_rng_normal(ddl_rng *r);
/* ddl_rng_below: an integer in [0, n), n >= 1, without modulo bias. */
uint32_t ddl_rng_below(ddl_rng *r, uint32_t n);

/* ddl_crc32: CRC-32 (IEEE, as zlib's crc32) of `bytes` bytes, continuing from `crc` (start at 0). */
uint32_t ddl_crc32(uint32_t crc, const void *data, size_t bytes);
/* ddl_crc32c: CRC-32C (Castagnoli, as iSCSI and ext4) of `bytes` bytes, continuing from crc
 * (start at 0): ddl_crc32c(0, "123456789", 9) == 0xE3069283. */
uint32_t ddl_crc32c(uint32_t crc, const void *data, size_t bytes);
/* ddl_hmac_sha256: out (32 bytes) = HMAC-SHA256 of msg[msg_bytes] with key[key_bytes] (RFC 2104):
 * the MAC ddl's handshakes and heartbeats use, for programs that derive values from the token. */
void ddl_hmac_sha256(const void *key, size_t key_bytes, const void *msg, size_t msg_bytes, unsigned char out[32]);

/* ---- optimizers and learning-rate schedules (what ddl_trainer_step applies) ---- */

/* ddl_optim_state_floats: floats of optimizer state for n parameters (SGD 1 n, Adam 2 n). */
size_t ddl_optim_state_floats(const ddl_optim_config *cfg, size_t n);
/* ddl_optim_step: one update of params[n] from grads[n] with learning rate lr; step counts from 1
 * (Adam's bias correction). state (ddl_optim_state_floats) starts zeroed. */
void ddl_optim_step(const ddl_optim_config *cfg, float lr, long step, float *params, const float *grads,
                    float *state, size_t n);
/* ddl_schedule_lr: learning rate at `step` (from 0) for base_lr. */
float ddl_schedule_lr(const ddl_schedule *s, float base_lr, long step);

/* ---- ops: the kernels model plugins are made of ----
 * Tensors are float32, row-major, batch first: (N, C, H, W). Each op takes plain pointers;
 * shapes are given in the comment of each and are not checked: the caller keeps them right.
 * None fails, and none allocates: workspaces are sized by the _workspace functions and owned
 * by the caller. Backward functions ACCUMULATE into parameter gradients (dw, db) and
 * OVERWRITE input gradients (dx). */

/* ddl_gemm: C = alpha * op(A) op(B) + beta * C, row-major, op(X) = X or X^T; op(A) is m x k,
 * op(B) is k x n, C is m x n; lda, ldb, ldc are row strides in elements. Every matrix product
 * in ddl goes through here: OpenBLAS cblas_sgemm (cblas_sgemv for one row), or the built-in
 * kernel (WITH_BLAS=none). Products of 2^20 multiply-adds or more are cut into fixed blocks of
 * 512 columns or 32 rows, run over ddl_set_threads' threads: the same bits on any count. */
void ddl_gemm(int trans_a, int trans_b, int m, int n, int k, float alpha, const float *a, int lda,
              const float *b, int ldb, float beta, float *c, int ldc);
/* ddl_gemm_backend: "openblas" or "builtin". */
const char *ddl_gemm_backend(void);
/* ddl_cpu_kernels: the kernels this CPU runs, chosen at run time: "avx512", "avx2" (with FMA) or
 * "x86-64-v2" (SSE4.2, the build's baseline) on x86-64; "portable" elsewhere, or in a build made
 * with -DDDL_NO_CLONES (the code -march allows; only WITH_BLAS=none's gemm still picks AVX2). */
const char *ddl_cpu_kernels(void);
/* ddl_cpu_bf16: the path the bfloat16 products of DDL_PRECISION_BF16 take on this CPU, chosen at
 * the first question and fixed after: "AMX" (tdpbf16ps tiles, used only once a small product on
 * them matched their emulation bit for bit), "AVX512-BF16" (vdpbf16ps), or "none" (a trainer
 * refuses bf16). DDL_CPU_NO_AMX=1 in the environment hides AMX, DDL_CPU_NO_BF16=1 both.
 * ddl_cpu_bf16_note: why the CPU's fastest path was passed over ("AMX hidden by DDL_CPU_NO_AMX",
 * or the element whose bits differed), "" if it was not. Static strings; any thread. */
const char *ddl_cpu_bf16(void);
const char *ddl_cpu_bf16_note(void);

/* Geometry of a 2-D convolution (also used, reversed, by the transposed convolution). */
typedef struct ddl_conv2d {
    int batch;                    /* N */
    int in_c, in_h, in_w;         /* input (N, in_c, in_h, in_w) */
    int out_c;                    /* output channels */
    int k_h, k_w, stride, pad;    /* the row stride (and the column one); zero padding on every side */
    /* Appended: each 0 keeps the geometry above (a struct filled before these existed still works). */
    int stride_w;                 /* column stride; 0: stride */
    int dilation_h, dilation_w;   /* spacing of the kernel's taps; 0: 1 */
    int groups;                   /* 0 or 1: every output reads every input channel; G: in_c and out_c
                                   * are cut into G groups, the weight is (out_c, in_c / G, k_h, k_w)
                                   * (transposed: refused, see ddl_deconv2d_workspace) */
    int pads4;                    /* 1: the padding is pad_t, pad_l, pad_b, pad_r (pad unused) */
    int pad_t, pad_l, pad_b, pad_r;
    int out_pad_h, out_pad_w;     /* transposed only: rows and columns added at the bottom and right of
                                   * the output (ConvTranspose2d's output_padding) */

    /* algorithm: DDL_CONV_DIRECT (0, the default) or DDL_CONV_WINOGRAD: 3x3 stride-1 convolutions
     * (no dilation or groups, pad 0 to 2) by Winograd where the size rule says it is faster
     * (docs/TRAINING.md, "Winograd"): F(4x4,3x3) on planes of whole 4x4 tiles with pad 1 (16x16
     * and up), F(2x2,3x3) elsewhere; other layers stay direct. Changes the float32 bits (a
     * relative error of up to about 3e-6 against direct, 10 times direct's), the same on any
     * thread count. The workspace depends on it: size it with the algo the passes will see. */
    int algo;
} ddl_conv2d;

#define DDL_CONV_DIRECT 0
#define DDL_CONV_WINOGRAD 1
#define DDL_CONV_WINOGRAD_ALL 2 /* every layer Winograd can take, whatever the size rule says (to test) */
#define DDL_CONV_WINOGRAD4_ALL 3 /* as _ALL, by F(4x4,3x3) wherever it tiles the plane (to test) */

/* ddl_conv2d_out_h / _out_w: output size (in + pad_t + pad_b - dilation (k - 1) - 1) / stride + 1:
 * with the defaults (in + 2 pad - k) / stride + 1. */
int ddl_conv2d_out_h(const ddl_conv2d *g);
int ddl_conv2d_out_w(const ddl_conv2d *g);
/* ddl_conv2d_workspace: floats of scratch the forward and backward passes need. */
size_t ddl_conv2d_workspace(const ddl_conv2d *g);
/* ddl_conv2d_forward: y (N, out_c, oh, ow) = conv(x (N, in_c, in_h, in_w), w (out_c, in_c, k_h, k_w))
 * + b (out_c); b may be NULL. */
void ddl_conv2d_forward(const ddl_conv2d *g, const float *x, const float *w, const float *b, float *y,
                        float *ws);
/* ddl_conv2d_backward: given dy (N, out_c, oh, ow): dw += dL/dw, db += dL/db (db may be NULL),
 * dx = dL/dx (dx may be NULL, for the first layer). */
void ddl_conv2d_backward(const ddl_conv2d *g, const float *x, const float *w, const float *dy, float *dx,
                         float *dw, float *db, float *ws);

/* Transposed convolution ("deconvolution") with the same geometry struct: input (N, in_c, in_h,
 * in_w), weight (in_c, out_c, k_h, k_w) as PyTorch's ConvTranspose2d, output size
 * (in - 1) * stride - pad_t - pad_b + dilation (k - 1) + 1 + out_pad: (in - 1) * stride - 2 pad + k
 * with the defaults. groups > 1 is not taken: ddl_deconv2d_workspace returns 0 and the passes do
 * nothing (the graph and the ONNX import refuse it). */
int ddl_deconv2d_out_h(const ddl_conv2d *g);
int ddl_deconv2d_out_w(const ddl_conv2d *g);
size_t ddl_deconv2d_workspace(const ddl_conv2d *g);
void ddl_deconv2d_forward(const ddl_conv2d *g, const float *x, const float *w, const float *b, float *y,
                          float *ws);
void ddl_deconv2d_backward(const ddl_conv2d *g, const float *x, const float *w, const float *dy, float *dx,
                           float *dw, float *db, float *ws);

/* ddl_maxpool_forward: y (N, C, oh, ow), oh = (h - k) / stride + 1; argmax (same count as y)
 * keeps the input index of each maximum for the backward pass. */
void ddl_maxpool_forward(int n, int c, int h, int w, int k, int stride, const float *x, float *y,
                         int32_t *argmax);
/* ddl_maxpool_backward: dx (N, C, h, w) = scatter of dy through argmax. */
void ddl_maxpool_backward(int n, int c, int h, int w, int k, int stride, const float *dy,
                          const int32_t *argmax, float *dx);

/* ddl_avgpool_forward: y (N, C, oh, ow) = means of k x k windows of x (N, C, h, w), as PyTorch's
 * AvgPool2d without padding; oh = (h - k) / stride + 1. ddl_avgpool_backward: dx (N, C, h, w) =
 * dy spread evenly over each window (overwritten, not added to). */
void ddl_avgpool_forward(int n, int c, int h, int w, int k, int stride, const float *x, float *y);
void ddl_avgpool_backward(int n, int c, int h, int w, int k, int stride, const float *dy, float *dx);
/* ddl_global_avgpool_forward: y (N, C) = mean of each of the C planes of s floats of x (N, C, s);
 * _backward: dx (N, C, s) = dy / s (overwritten). */
void ddl_global_avgpool_forward(int n, int c, int s, const float *x, float *y);
void ddl_global_avgpool_backward(int n, int c, int s, const float *dy, float *dx);

/* Pooling of any geometry (ONNX's MaxPool and AveragePool, PyTorch's MaxPool2d and AvgPool2d):
 * windows of k_h x k_w taps, dilation apart, every stride_h rows and stride_w columns of x (N, C,
 * h, w) padded by pad_t, pad_l, pad_b, pad_r (padding is never the maximum; the average counts it
 * only with count_include_pad). Output rows (h + pad_t + pad_b - dilation_h (k_h - 1) - 1) /
 * stride_h + 1, rounded down, or up with ceil_mode (then, as PyTorch, a last window that would
 * start in the bottom padding is dropped); the same for columns. Strides are >= 1; a dilation
 * of 0 means 1. Plain windows (square, equal strides, no padding or dilation) run
 * ddl_maxpool_forward / ddl_avgpool_forward, bit for bit. Average pooling takes no dilation. */
struct ddl_pool2d {
    int k_h, k_w, stride_h, stride_w;
    int pad_t, pad_l, pad_b, pad_r;
    int dilation_h, dilation_w; /* 0: 1 */
    int ceil_mode;              /* 1: round the output size up */
    int count_include_pad;      /* average: divide by the window's taps inside the padded image,
                                 * not only those inside the image */
};
/* ddl_pool2d_out: the output's rows (axis 0) or columns (axis 1) for an input of `in`; 0 if none. */
int ddl_pool2d_out(const ddl_pool2d *p, int axis, int in);
/* ddl_pool2d_ok: 1 when the geometry is one the kernels take for an (h, w) input (avg: no
 * dilation), every window holding a tap of the image; 0 if not. */
int ddl_pool2d_ok(const ddl_pool2d *p, int avg, int h, int w);
/* ddl_maxpool2d_forward: y (N, C, oh, ow), argmax (as many) the index in its (h, w) plane of
 * each maximum; _backward: dx (N, C, h, w) = dy scattered through argmax (overwritten). */
void ddl_maxpool2d_forward(const ddl_pool2d *p, int n, int c, int h, int w, const float *x, float *y,
                           int32_t *argmax);
void ddl_maxpool2d_backward(const ddl_pool2d *p, int n, int c, int h, int w, const float *dy,
                            const int32_t *argmax, float *dx);
/* ddl_avgpool2d_forward: y (N, C, oh, ow) the windows' means; _backward: dx (N, C, h, w)
 * (overwritten). */
void ddl_avgpool2d_forward(const ddl_pool2d *p, int n, int c, int h, int w, const float *x, float *y);
void ddl_avgpool2d_backward(const ddl_pool2d *p, int n, int c, int h, int w, const float *dy, float *dx);

/* ddl_add: y = a + b over `count` floats (y may equal a or b), on ddl_set_threads' threads: the
 * same bits at any thread count (a skip connection's gradients joined, a residual add). */
void ddl_add(size_t count, const float *a, const float *b, float *y);
/* ddl_relu_forward: y = max(x, 0) over `count` floats (y may equal x). */
void ddl_relu_forward(size_t count, const float *x, float *y);
/* ddl_relu_backward: dx = dy where y > 0, else 0 (dx may equal dy). */
void ddl_relu_backward(size_t count, const float *y, const float *dy, float *dx);

/* ddl_dense_forward: y (batch, out) = x (batch, in) w^T + b, w (out, in) as PyTorch's Linear. */
void ddl_dense_forward(int batch, int in, int out, const float *x, const float *w, const float *b, float *y);
/* ddl_dense_backward: dw += dy^T x, db += sum dy, dx = dy w (dx may be NULL). */
void ddl_dense_backward(int batch, int in, int out, const float *x, const float *w, const float *dy,
                        float *dx, float *dw, float *db);

/* ddl_dropout_forward: inverted dropout with drop probability p in [0, 1): y = x * mask / (1 - p);
 * mask (count bytes) records what was kept. With training == 0, y = x. */
void ddl_dropout_forward(size_t count, float p, int training, ddl_rng *rng, const float *x, float *y,
                         uint8_t *mask);
void ddl_dropout_backward(size_t count, float p, const uint8_t *mask, const float *dy, float *dx);

/* ddl_softmax_xent: softmax cross-entropy over the class dimension of logits (N, C, S), where S
 * is the number of positions per sample (1 for classification, H*W for segmentation) and
 * targets (N, S) hold class indices. Returns the SUM of the per-position losses. When dlogits is
 * not NULL it receives scale * dL/dlogits (the caller passes scale = 1 / total positions of the
 * global batch, so the sum over ranks is the gradient of the mean). probs may be NULL. */
double ddl_softmax_xent(int n, int c, int s, const float *logits, const uint16_t *targets, float scale,
                        float *probs, float *dlogits);

/* ddl_dice_loss: soft dice loss of foreground (classes >= 1) against background, summed over
 * the batch: per sample 1 - (2 sum p_fg t_fg + 1) / (sum p_fg + sum t_fg + 1), where p_fg is
 * 1 - softmax probability of class 0. probs (N, C, S) from ddl_softmax_xent. Adds
 * scale * dL/dlogits to dlogits when it is not NULL. Returns the sum of per-sample losses. */
double ddl_dice_loss(int n, int c, int s, const float *probs, const uint16_t *targets, float scale,
                     float *dlogits);

/* ddl_groupnorm_forward: group normalisation of x (N, C, S) with `groups` groups, per-channel
 * gamma and beta (C). Statistics are per sample, so data parallelism needs no synchronisation.
 * mean_rstd (N, groups, 2) is kept for the backward pass. */
void ddl_groupnorm_forward(int n, int c, int s, int groups, const float *x, const float *gamma,
                           const float *beta, float *y, float *mean_rstd);
void ddl_groupnorm_backward(int n, int c, int s, int groups, const float *x, const float *gamma,
                            const float *mean_rstd, const float *dy, float *dx, float *dgamma, float *dbeta);
/* ddl_groupnorm_relu_*: GroupNorm then ReLU, a pass over y fewer each way. The backward takes that
 * y as the mask (dy counts where y > 0) and gives, bit for bit, ddl_relu_backward then
 * ddl_groupnorm_backward, without writing the masked dy. */
void ddl_groupnorm_relu_forward(int n, int c, int s, int groups, const float *x, const float *gamma,
                                const float *beta, float *y, float *mean_rstd);
void ddl_groupnorm_relu_backward(int n, int c, int s, int groups, const float *x, const float *gamma,
                                 const float *mean_rstd, const float *y, const float *dy, float *dx, float *dgamma,
                                 float *dbeta);

/* ddl_concat_channels: y (N, ca + cb, S) = [a (N, ca, S), b (N, cb, S)] along channels. */
void ddl_concat_channels(int n, int ca, int cb, int s, const float *a, const float *b, float *y);
/* ddl_split_channels: the backward of concat: da = dy[:, :ca], db = dy[:, ca:]. */
void ddl_split_channels(int n, int ca, int cb, int s, const float *dy, float *da, float *db);

/* ---- activations (src/core/act.c) ----
 * ddl_act_forward: y = f(x) over `count` floats for a DDL_ACT_* kind with its alpha and beta (as
 * ddl_graph_act says; y may equal x). ddl_act_backward: dx = f'(x) dy (overwritten; dx may equal
 * dy). SIGMOID, TANH, HARDSIGMOID, CLIP, LEAKY_RELU with alpha >= 0 and ELU with alpha > 0 take
 * the derivative from y and do not read x (a layer computed in place has no x left: pass y or
 * NULL); the others take it from x and do not read y. exp, erf and tanh are libm's in float;
 * each value is computed alone, so the bits do not depend on the threads. */
void ddl_act_forward(int kind, float alpha, float beta, size_t count, const float *x, float *y);
void ddl_act_backward(int kind, float alpha, float beta, size_t count, const float *x, const float *y,
                      const float *dy, float *dx);
/* ddl_softmax_forward: y = softmax of x (outer, n, inner) over its n axis (log: log softmax),
 * each of the outer * inner rows alone, its sum in double in the order of n (y may equal x).
 * ddl_softmax_backward: dx from the output y and dy: y (dy - sum dy y), or for log softmax
 * dy - e^y sum dy (overwritten; dx may equal dy). */
void ddl_softmax_forward(size_t outer, size_t n, size_t inner, int log, const float *x, float *y);
void ddl_softmax_backward(size_t outer, size_t n, size_t inner, int log, const float *y, const float *dy, float *dx);

/* ---- profiling: where a training step's time goes, layer by layer ----
 * A plugin describes its layers in build() (ddl_build_layer: name, kind, output shape, FLOPs per
 * sample from the geometry) and marks the end of each in its passes (ddl_model_layer_done). A
 * trainer given a ddl_profile (ddl_train_config.profile) times every training pass of its model
 * (and of its micro-batch copies) that way and splits each step; ddl_profile_format makes the
 * table a program prints. Timing reads the monotonic clock once per layer and pass; with no
 * profile it costs one test per layer, and allocates nothing either way. What is counted as
 * FLOPs: 2 per multiply-add of convolutions, transposed convolutions and dense layers (forward:
 * 2 out_c out_h out_w in_c/groups k_h k_w per sample for a convolution, 2 in out for a dense
 * layer; backward: the same again for the weights' gradient, and again for the input's when the
 * layer computes it, so the first layer's backward counts once); nothing else (bias, pooling,
 * normalisation, activations, dropout, concatenation, resizing: 0 FLOPs, their time shown). */

#define DDL_PROFILE_MAX_LAYERS 1024 /* layers a model may declare: those after are not timed */

typedef struct ddl_profile_layer {
    char name[32];          /* the plugin's: "conv1", a graph layer's name or its number */
    char kind[16];          /* "conv", "dense", "maxpool", "relu", ... */
    int c, h, w;            /* its output per sample */
    double fwd_flops;       /* per sample, from the geometry (what is counted: above) */
    double bwd_flops;
    int64_t fwd_ns, bwd_ns; /* summed over the training passes timed (monotonic nanoseconds) */
    int64_t fwd_samples, bwd_samples; /* samples those passes ran */
} ddl_profile_layer;

struct ddl_profile {
    double peak_gflops;     /* one core's float32 multiply-add peak (ddl_cpu_peak_gflops) */
    const char *peak_isa;   /* the vector code that measured it: "avx512", "avx2" or "scalar" */
    int rank, world;        /* whose profile this is: each rank times its own */
    int parts, threads;     /* micro-batches (or shards) a step, and threads for the kernels */
    int cores;              /* the cores a layer's time ran on, whose peak its share is of: the
                             * threads, or 1 when the parts ran side by side, a thread each (the
                             * layer times are then thread time, summed over the parts) */
    int64_t steps;          /* steps timed */
    /* each step's time, summed: gathering the batch; forward, loss and backward; waiting for the
     * gradient all-reduce after backward (what an overlap did not hide; 0 on one rank);
     * the optimizer; and the whole step (the four add up to it) */
    int64_t data_ns, compute_ns, allreduce_ns, optimizer_ns, step_ns;
    int n_layers;
    ddl_profile_layer layers[DDL_PROFILE_MAX_LAYERS];
};

/* ddl_cpu_peak_gflops: measure this core's float32 peak: independent multiply-add chains in the
 * widest vectors the CPU has (AVX-512, AVX2 with FMA, or the build's baseline), chosen at run
 * time, for about 80 ms, the best of four slices. *isa (may be NULL) gets "avx512", "avx2" or
 * "scalar". Another busy thread on the core lowers it: measure on an idle core. Returns GFLOP/s. */
double ddl_cpu_peak_gflops(const char **isa);

/* ddl_build_layer: for a plugin's build(): describe its next layer, for profiles: name (31 bytes
 * kept) and kind (15), its output shape per sample, and its FLOPs per sample forward and
 * backward as counted above (ddl_conv2d_flops helps). Returns the layer's index, from 0 in the
 * order of the calls, to give ddl_model_layer_done; -1 past DDL_PROFILE_MAX_LAYERS (that layer is
 * then not timed; the build goes on). A plugin that declares none is profiled by the step alone. */
int ddl_build_layer(ddl_model_build *b, const char *name, const char *kind, int c, int h, int w, double fwd_flops,
                    double bwd_flops);
/* ddl_model_profiling: for a plugin's forward and backward: 1 when the pass in progress of the
 * model whose plugin state is self is timed, else 0. Ask once per pass, then call
 * ddl_model_layer_done only when it said 1: the untimed pass then costs one test per layer. */
int ddl_model_profiling(const void *self);
/* ddl_model_layer_done: layer `layer` (ddl_build_layer's index) has just finished its part of the
 * timed pass in progress: the time since the pass began, or since the last call, is its (a
 * backward pass runs the layers last first). Ignored outside a timed pass or for -1. */
void ddl_model_layer_done(void *self, int layer);
/* ddl_conv2d_flops / ddl_deconv2d_flops: forward FLOPs per sample of a convolution
 * (2 out_c out_h out_w in_c/groups k_h k_w) and of a transposed one (2 in_c in_h in_w out_c k_h k_w). */
double ddl_conv2d_flops(const ddl_conv2d *g);
double ddl_deconv2d_flops(const ddl_conv2d *g);

/* ddl_model_profile: time m's training passes (on 1) or not (0), for a caller's own loop (a
 * trainer with a profile does this itself). ddl_model_profile_take: add what m timed since the
 * last take into p's layers (described from the model's first: p->n_layers set) and zero m's.
 * Returns DDL_OK, or DDL_EINVAL (m or p NULL, or p holds another model's layers). */
void ddl_model_profile(ddl_model *m, int on);
int ddl_model_profile_take(ddl_model *m, ddl_profile *p);

/* ddl_profile_format: p as a table to print: a header (rank, steps, peak), a line per layer
 * (name, kind, output shape, forward and backward ms per step, GFLOP/s and its share of the peak,
 * "-" where no FLOPs are counted), the layers' sum, and the step's split (data, compute,
 * all-reduce wait, optimizer, in ms per step and percent). Writes at most bytes (NUL included)
 * and returns the whole length, as snprintf. */
size_t ddl_profile_format(const ddl_profile *p, char *buf, size_t bytes);

#ifdef __cplusplus
}
#endif
#endif /* DDL_H */
