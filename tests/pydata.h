/* pydata.h - for the tests whose files a Python script writes (numpy, PIL): a directory of this
 * process under /tmp, paths in it, the script run into it, and the directory removed. */
#ifndef DDL_PYDATA_H
#define DDL_PYDATA_H
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

static char pydata_dir[64];

/* at: DIR/name (four at a time may be alive). */
static const char *at(const char *name)
{
    static char buf[4][256];
    static int k;
    k = (k + 1) % 4;
    snprintf(buf[k], sizeof buf[k], "%s/%s", pydata_dir, name);
    return buf[k];
}

/* pydata_make: run Debian's python3 (make's install step installs it and the modules the scripts
 * need) on script with the directory; 1 if it succeeded. */
static int pydata_make(const char *tag, const char *script)
{
    char cmd[512];
    snprintf(pydata_dir, sizeof pydata_dir, "/tmp/ddl-%s-%d", tag, (int)getpid());
    const char *py = access("/usr/bin/python3", X_OK) == 0 ? "/usr/bin/python3" : "python3";
    snprintf(cmd, sizeof cmd, "%s %s %s", py, script, pydata_dir);
    return system(cmd) == 0;
}

static void pydata_remove(void)
{
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf %s", pydata_dir);
    if (system(cmd) != 0)
        fprintf(stderr, "could not remove %s\n", pydata_dir);
}
#endif
