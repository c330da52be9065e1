/* fuzz_folder.c - libFuzzer target of the image-folder walker (src/data/folder.c, over
 * decode.c): the input is made into a small folder tree, DIR/c0 .. c3 holding what its
 * entries say, and given to ddl_dataset_load_folder. The first byte: bit 0, 3 channels (else
 * 1); bit 1, skip_bad (and a log callback that must get a line for each of the first files
 * left out); bits 2-4, the size (2 to 9 on a side). Then entries, at most MAX_ENTRIES: a byte
 * (bits 0-1 the class folder; bits 2-4 the kind: 0 to 4 an image file .png .jpg .jpeg .pgm
 * .ppm, 5 a .txt file, 6 a FIFO named .png, 7 a directory named .jpg), a u16 little-endian
 * length, and that many bytes of the file. A data set that loads is read to its last pixel and
 * label; the tree is removed after every input. Every input must give DDL_OK or an error with a
 * message, never a crash, a hang (a FIFO opened), a leak or a read out of bounds. Seeds:
 * tests/fuzz/corpus/fuzz_folder/ (tests/fuzz/make_corpus.py). */
#include "ddl.h"
#include "fuzz_common.h"

#include <string.h>
#include <sys/stat.h>

#define MAX_ENTRIES 12

static volatile uint8_t sink; /* reads the optimiser cannot drop */
static int n_logged;

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

FUZZ_ASAN_QUARANTINE_64MB /* images near ddl's 2^26 pixels (fuzz_common.h) */

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc, (void)argv;
    ddl_set_threads(1); /* the same order every run, and no threads to start per input */
    return 0;
}

static void logged(void *ud, int level, const char *msg)
{
    (void)ud;
    if (level != DDL_LOG_WARN || strncmp(msg, "left out ", 9) != 0)
        abort();
    n_logged++;
}

/* what one input made, to be removed in reverse order */
typedef struct made {
    char paths[4 + 2 * MAX_ENTRIES][640];
    int dir[4 + 2 * MAX_ENTRIES], n;
} made;

static const char *add(made *m, const char *path, int is_dir)
{
    snprintf(m->paths[m->n], sizeof m->paths[0], "%s", path);
    m->dir[m->n] = is_dir;
    return m->paths[m->n++];
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1)
        return 0;
    static const char *const ext[] = {"png", "jpg", "jpeg", "pgm", "ppm", "txt", "png", "jpg"};
    const char *root = fuzz_path("folder");
    if (mkdir(root, 0700) != 0)
        abort();
    made m = {.n = 0};
    int has_class[4] = {0};
    char p[640];
    size_t at = 1;
    for (int e = 0; e < MAX_ENTRIES && at + 3 <= size; e++) {
        int cls = data[at] & 3, kind = (data[at] >> 2) & 7;
        size_t len = (size_t)data[at + 1] | (size_t)data[at + 2] << 8;
        at += 3;
        len = len < size - at ? len : size - at;
        if (!has_class[cls]) {
            snprintf(p, sizeof p, "%s/c%d", root, cls);
            if (mkdir(p, 0700) != 0)
                abort();
            add(&m, p, 1);
            has_class[cls] = 1;
        }
        snprintf(p, sizeof p, "%s/c%d/f%02d.%s", root, cls, e, ext[kind]);
        if (kind == 6 && mkfifo(p, 0600) != 0)
            abort();
        if (kind == 7 && mkdir(p, 0700) != 0)
            abort();
        if (kind < 6)
            fuzz_write(p, data + at, len);
        add(&m, p, kind == 7);
        at += len;
    }
    int c = (data[0] & 1) ? 3 : 1, side = 2 + ((data[0] >> 2) & 7), skip = (data[0] >> 1) & 1;
    ddl_folder_config cfg = {.channels = c, .height = side, .width = side + 1, .skip_bad = skip,
                             .log = skip ? logged : NULL};
    ddl_dataset d;
    int n_skipped = -1;
    char err[DDL_ERR_BYTES];
    err[0] = 0;
    n_logged = 0;
    int rc = ddl_dataset_load_folder(root, &cfg, NULL, &d, &n_skipped, err, sizeof err);
    if (rc == DDL_OK) {
        size_t per = (size_t)c * (size_t)side * (size_t)(side + 1);
        int lines = n_skipped <= 10 ? n_skipped : 11; /* 10 named, then a count */
        if (d.n < 1 || d.n_classes < 1 || !d.class_names || n_skipped < 0 || n_logged != lines)
            abort();
        sink ^= d.images[(size_t)d.n * per - 1];
        if (d.targets[d.n - 1] >= d.n_classes)
            abort();
        ddl_dataset_free(&d);
    } else if (!err[0] || d.images) {
        abort();
    }
    while (m.n-- > 0)
        m.dir[m.n] ? rmdir(m.paths[m.n]) : unlink(m.paths[m.n]);
    rmdir(root);
    return 0;
}
