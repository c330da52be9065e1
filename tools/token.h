/* token.h - ddlrun's secret and what comes from it: the token read from a file only its owner
 * may read (it never goes on a command line, where other users could see it), and the job id of
 * a job on several nodes, which every node derives alone from the token and the master: an
 * HMAC-SHA256, so only who holds the token knows it. (A CRC of the master, as before, let anyone
 * who knew the master send HELLOs of the right job and hold the handshake pool's slots.) For
 * programs only (ddlrun). */
#ifndef DDL_TOKEN_H
#define DDL_TOKEN_H

#include "ddl.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

/* token_read_file: the first line of path into line (bytes); -1, said on stderr, when the file
 * cannot be read, others may read it, or the line is empty. */
static inline int token_read_file(const char *path, char *line, size_t bytes)
{
    struct stat st;
    FILE *f = fopen(path, "r");
    if (!f || fstat(fileno(f), &st) != 0) {
        fprintf(stderr, "ddlrun: --token-file %s: %s\n", path, strerror(errno));
        if (f)
            fclose(f);
        return -1;
    }
    if (st.st_mode & 077) {
        fprintf(stderr, "ddlrun: --token-file %s: other users may read it (mode %03o); chmod 600 it\n", path,
                (unsigned)(st.st_mode & 0777));
        fclose(f);
        return -1;
    }
    line[0] = '\0';
    int got = fgets(line, (int)bytes, f) != NULL;
    fclose(f);
    line[strcspn(line, "\r\n")] = '\0';
    if (!got || !line[0]) {
        fprintf(stderr, "ddlrun: --token-file %s: the first line is empty\n", path);
        return -1;
    }
    return 0;
}

/* token_job_id: "m" and 16 hex digits of HMAC-SHA256(token, "ddl job " master) into out (18 bytes). */
static inline void token_job_id(char *out, const char *token, const char *master)
{
    unsigned char mac[32];
    char msg[320];
    snprintf(msg, sizeof msg, "ddl job %s", master);
    ddl_hmac_sha256(token, strlen(token), msg, strlen(msg), mac);
    out[0] = 'm';
    for (int i = 0; i < 8; i++)
        snprintf(out + 1 + 2 * i, 3, "%02x", mac[i]);
}

#endif
