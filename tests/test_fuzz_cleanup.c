/* test_fuzz_cleanup.c - the fuzz targets (tests/fuzz/) leave nothing behind: a process that made
 * files and a directory with fuzz_path, as the targets do, has none of them left after it
 * exits the way libFuzzer ends a run (exit), in /dev/shm (the default) and under $TMPDIR. */
#include "check.h"
#include "fuzz/fuzz_common.h"

#include <dirent.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>

/* left: how many entries of dir start with ddl-fuzz-PID-. */
static int left(const char *dir, int pid)
{
    char prefix[64];
    int n = 0;
    snprintf(prefix, sizeof prefix, "ddl-fuzz-%d-", pid);
    DIR *d = opendir(dir);
    for (struct dirent *e; d && (e = readdir(d));)
        n += strncmp(e->d_name, prefix, strlen(prefix)) == 0;
    if (d)
        closedir(d);
    return n;
}

/* child: what the targets make (fuzz_idx: a directory with two files; the others: files),
 * then exit 0 if all of it was there. */
static void child(const char *dir)
{
    static const uint8_t bytes[4] = {1, 2, 3, 4};
    const char *d = fuzz_path("mnist");
    char in[600];
    int ok = mkdir(d, 0700) == 0;
    snprintf(in, sizeof in, "%s/t10k-images-idx3-ubyte", d);
    fuzz_write(in, bytes, sizeof bytes);
    fuzz_write(fuzz_path("ckpt"), bytes, sizeof bytes);
    fuzz_write(fuzz_path("x.onnx"), bytes, sizeof bytes);
    ok = ok && left(dir, (int)getpid()) == 3;
    exit(ok ? 0 : 1);
}

static void run(const char *tmpdir, const char *dir)
{
    if (tmpdir)
        setenv("TMPDIR", tmpdir, 1);
    else
        unsetenv("TMPDIR");
    fflush(stdout);
    pid_t pid = fork();
    if (pid == 0)
        child(dir);
    int status = 0;
    CHECK(waitpid(pid, &status, 0) == pid && WIFEXITED(status) && WEXITSTATUS(status) == 0); /* made them */
    int n = left(dir, (int)pid);
    CHECK(n == 0);
    if (n)
        fprintf(stderr, "%d ddl-fuzz-%d-* left in %s\n", n, (int)pid, dir);
}

int main(void)
{
    if (access("/dev/shm", W_OK) == 0)
        run(NULL, "/dev/shm");
    char tmp[] = "/tmp/ddl-test-fuzz-XXXXXX";
    CHECK(mkdtemp(tmp) != NULL);
    run(tmp, tmp);
    CHECK(rmdir(tmp) == 0); /* empty */
    return TEST_END();
}
