/* src/formats/checkpoint.h - the checkpoint file format's internal face (checkpoint.c,
 * checkpoint_bufs.c, checkpoint_desc.c): the reader's object behind ddl.h's ddl_checkpoint_* and
 * the writer's input, which the trainer (src/train) fills. The format knows no ranks and no
 * trainer; inference reads checkpoints through ddl.h alone, so it links against no training.
 * Not API. */
#ifndef DDL_FORMATS_CHECKPOINT_H
#define DDL_FORMATS_CHECKPOINT_H
#include "core/impl.h"

struct ddl_checkpoint {
    const ddl_allocator *alloc;
    ddl_checkpoint_info info;
    ddl_param_info tensors[DDL_MAX_PARAMS];
    char names[DDL_MAX_PARAMS][DDL__NAME_BYTES];
    ddl_rng *rngs;  /* (info.world_size) every rank's dropout RNG */
    float *params;  /* (info.n_params) */
    float *optim;   /* (info.n_optim), NULL when n_optim is 0 */
    void *desc;     /* section DESC decoded (checkpoint_desc.c), NULL without one: */
    const char *arch;                /* the layer graph's text, or NULL */
    const char *const *class_names;  /* info.model_cfg.n_classes names, or NULL */
    /* section BUFS (checkpoint_bufs.c): the model's buffers; none in files without it */
    ddl_param_info buf_tensors[DDL_MAX_BUFFERS];
    char buf_names[DDL_MAX_BUFFERS][DDL__NAME_BYTES];
    int n_buf_tensors;
    float *buffers;
    size_t n_buffers;
    ddl_unet_config unet; /* a U-Net's depth and width, from the header (ddl_checkpoint_plugin_config) */
};

/* What ddl__checkpoint_write puts in a file: the model's tensors, weights and normalisation,
 * plus the fields of info that are not the model's (optim, step, epoch, pos, n_train, batch,
 * seed, world_size); the rest of info is filled from m. */
typedef struct ddl__checkpoint_src {
    const ddl_model *m;
    ddl_checkpoint_info info;
    const ddl_rng *rngs;  /* (info.world_size) */
    const float *optim;   /* (info.n_optim) */
    long bytes_per_sec;   /* write no faster than this (0: as fast as the disk goes) */
    const unsigned char *desc; /* section DESC (ddl__checkpoint_desc_encode), or NULL */
    size_t desc_bytes;
} ddl__checkpoint_src;

/* ddl__checkpoint_desc_encode: section DESC for model m and the n_names class names of its data
 * (NULL: none; kept only when they are as many as the model's classes): u32 length and the text of m's layer graph (0: it has none), u32 count and that many
 * names of u16 length and bytes. *out from alloc (the caller frees it), NULL with *bytes 0 when
 * there is nothing to describe. DDL_OK or DDL_ENOMEM. */
int ddl__checkpoint_desc_encode(const ddl_model *m, const char *const *class_names, int n_names,
                                const ddl_allocator *alloc, unsigned char **out, size_t *bytes);
/* ddl__checkpoint_desc_decode: check section DESC (n bytes at p) and keep it in ck (ck->desc,
 * ck->arch, ck->class_names). DDL_OK, DDL_ECORRUPT naming path and what is wrong, DDL_ENOMEM. */
int ddl__checkpoint_desc_decode(ddl_checkpoint *ck, const unsigned char *p, size_t n, const char *path, char *err,
                                size_t err_bytes);

/* Section BUFS (checkpoint_bufs.c). bytes: its length for m (0: m has no buffers); encode: into
 * p of that length; decode: check n bytes at p and keep them in ck (DDL_OK, DDL_ECORRUPT naming
 * path and what is wrong, DDL_ENOMEM); check: ck's buffers are m's (names and sizes), else
 * DDL_EINVAL saying which. */
size_t ddl__checkpoint_bufs_bytes(const ddl_model *m);
void ddl__checkpoint_bufs_encode(const ddl_model *m, unsigned char *p);
int ddl__checkpoint_bufs_decode(ddl_checkpoint *ck, const unsigned char *p, size_t n, const char *path, char *err,
                                size_t err_bytes);
int ddl__checkpoint_bufs_check(const ddl_checkpoint *ck, const ddl_model *m, char *err, size_t err_bytes);

/* ddl__checkpoint_write: write src to path atomically (path.tmp, fsync, rename, fsync of the
 * directory). The file image is allocated from alloc for the duration of the call. */
int ddl__checkpoint_write(const char *path, const ddl_allocator *alloc, const ddl__checkpoint_src *src, char *err,
                          size_t err_bytes);
/* ddl__checkpoint_image: what ddl__checkpoint_write writes, into img instead (the caller's, of
 * *bound bytes): with img NULL it only sets *bound, the bytes it needs for src's model (the same
 * at every save of one trainer); else *len gets the file's length. ddl__checkpoint_put: img's len
 * bytes to path atomically, as ddl__checkpoint_write does (checkpoint_async.c: the writer
 * thread). DDL_OK or the error, in err. */
int ddl__checkpoint_image(const char *path, const ddl__checkpoint_src *src, unsigned char *img, size_t *bound,
                          size_t *len, char *err, size_t err_bytes);
int ddl__checkpoint_put(const char *path, const unsigned char *img, size_t len, long bytes_per_sec, char *err,
                        size_t err_bytes);

#endif
