/* app.c - a program built against an installed ddl by tests/test_install.sh, through pkg-config
 * and through CMake. It trains LeNet a few steps on random bytes and saves and reopens a
 * checkpoint, so its link needs OpenBLAS, lz4 and, when ddl was built with it, MPI; then prints
 * one line for the test to check. */
#include <ddl.h>

#include <stdio.h>
#include <string.h>

int main(int argc, char **argv)
{
    enum { N = 64, HW = 28 };
    static uint8_t images[N * HW * HW], labels[N];
    ddl_rng r;
    ddl_rng_seed(&r, 1);
    for (int i = 0; i < N * HW * HW; i++)
        images[i] = (uint8_t)ddl_rng_below(&r, 256);
    for (int i = 0; i < N; i++)
        labels[i] = (uint8_t)ddl_rng_below(&r, 10);
    ddl_dataset train = {.n = N, .c = 1, .h = HW, .w = HW, .th = 1, .tw = 1, .n_classes = 10,
                         .images = images, .targets = labels};
    ddl_model_config mc = {.batch = 16, .in_c = 1, .in_h = HW, .in_w = HW, .n_classes = 10};
    ddl_train_config tc;
    ddl_train_config_default(&tc);
    tc.batch = 16;
    ddl_model *m = NULL;
    ddl_trainer *t = NULL;
    ddl_checkpoint *ck = NULL;
    char err[DDL_ERR_BYTES] = "";
    double loss = 0.0;
    const char *path = argc > 1 ? argv[1] : "app.ckpt";
    int rc = ddl_model_create(ddl_model_lenet(), &mc, NULL, &m, err, sizeof err);
    if (!rc)
        rc = ddl_trainer_create(&tc, m, &train, NULL, &t, err, sizeof err);
    for (int s = 0; s < 4 && !rc; s++)
        rc = ddl_trainer_step(t, &loss);
    if (!rc)
        rc = ddl_trainer_save(t, path);
    if (!rc)
        rc = ddl_checkpoint_open(path, NULL, &ck, err, sizeof err);
    if (rc) {
        fprintf(stderr, "app: %s %s\n", ddl_strerror(rc), t ? ddl_trainer_error(t) : err);
        return 1;
    }
    int same = !memcmp(ddl_checkpoint_params(ck), ddl_model_params(m), ddl_model_n_params(m) * sizeof(float));
    printf("ddl %s gemm=%s mpi=%s lz4=%d same=%d loss=%.4f\n", ddl_version_string(), ddl_gemm_backend(),
           ddl_transport_mpi() ? "yes" : "no", ddl_checkpoint_get_info(ck)->compressed, same, loss);
    ddl_checkpoint_close(ck);
    ddl_trainer_destroy(t);
    ddl_model_destroy(m);
    return same ? 0 : 1;
}
