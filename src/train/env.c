/* env.c - ddl_train_config_from_env: the trainer's settings that a launcher or a user sets in the
 * environment (DDL_OVERLAP, DDL_BUCKET_KB), read only when the caller asks, as the comm's are
 * (src/comm/env.c). */
#include "impl.h"

#include <stddef.h>

int ddl_train_config_from_env(ddl_train_config *cfg, char *err, size_t err_bytes)
{
    if (!cfg)
        return ddl__errf(err, err_bytes, DDL_EINVAL, "cfg is NULL");
    static const char *const overlap_n[] = {"DDL_OVERLAP", NULL}, *const bucket_n[] = {"DDL_BUCKET_KB", NULL};
    int overlap = cfg->overlap, bucket_kb = cfg->bucket_kb, f_overlap, f_bucket, st;
    if ((st = ddl__env_int(overlap_n, &overlap, &f_overlap, err, err_bytes)) != DDL_OK ||
        (st = ddl__env_int(bucket_n, &bucket_kb, &f_bucket, err, err_bytes)) != DDL_OK)
        return st;
    if (f_overlap && (overlap < 0 || overlap > 2))
        return ddl__errf(err, err_bytes, DDL_EINVAL, "DDL_OVERLAP=%d: expected 0, 1 or 2", overlap);
    if (f_bucket && (bucket_kb < 0 || bucket_kb > (1 << 20)))
        return ddl__errf(err, err_bytes, DDL_EINVAL, "DDL_BUCKET_KB=%d: expected 1 to 1048576 (0: the default, %d)",
                         bucket_kb, DDL__BUCKET_KB_DEFAULT);
    cfg->overlap = overlap;
    cfg->bucket_kb = bucket_kb;
    return DDL_OK;
}
