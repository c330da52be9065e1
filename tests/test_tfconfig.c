/* test_tfconfig.c - TensorFlow's TF_CONFIG (src/comm/tfconfig.c, env.c): the cluster shapes
 * TFJob and MultiWorkerMirroredStrategy use read as peers, rank and world (the chief is rank 0,
 * worker i then rank i + 1; local ranks among the same host name); malformed JSON and the shapes
 * ddl has no place for (a parameter server, an evaluator, two chiefs, an index past the list, a
 * sparse cluster) refused with a message naming what was wrong; and in the environment, the
 * explicit DDL_ variables and the other launchers' ranks win over TF_CONFIG. */
#include "check.h"
#include "comm/impl.h"

#include <stdlib.h>
#include <string.h>

static ddl_comm_config cfg;
static ddl_comm_env env; /* 8 KB of peers: not on the stack of every call */

/* good: json parses to rank, world, local rank and size, and peers. */
static void good(const char *json, int rank, int world, int lrank, int lsize, const char *peers)
{
    char err[256] = "";
    memset(&cfg, 0, sizeof cfg);
    int rc = ddl__tf_config(json, &cfg, &env, err, sizeof err);
    int same = rc == DDL_OK && cfg.rank == rank && cfg.world_size == world && cfg.local_rank == lrank &&
               cfg.local_size == lsize && cfg.peers && strcmp(cfg.peers, peers) == 0;
    CHECK(same);
    if (!same)
        fprintf(stderr, "  %s\n  got rc %d (%s) rank %d world %d local %d/%d peers %s\n", json, rc, err, cfg.rank,
                cfg.world_size, cfg.local_rank, cfg.local_size, cfg.peers ? cfg.peers : "(null)");
}

/* refused: json is refused, the message holding want. */
static void refused(const char *json, const char *want)
{
    char err[256] = "";
    memset(&cfg, 0, sizeof cfg);
    int rc = ddl__tf_config(json, &cfg, &env, err, sizeof err);
    int ok = rc == DDL_EINVAL && strstr(err, want) && strncmp(err, "TF_CONFIG: ", 11) == 0 && !cfg.peers;
    CHECK(ok);
    if (!ok)
        fprintf(stderr, "  %s\n  got rc %d: '%s', want '%s'\n", json, rc, err, want);
}

int main(void)
{
    /* ---- the shapes launchers write ---- */
    good("{\"cluster\": {\"worker\": [\"a:2222\", \"b:2222\"]}, \"task\": {\"type\": \"worker\", \"index\": 1}}",
         1, 2, 0, 1, "a:2222,b:2222");
    good("{\"cluster\":{\"worker\":[\"a:2222\",\"b:2222\"]},\"task\":{\"type\":\"worker\",\"index\":0}}", 0, 2, 0, 1,
         "a:2222,b:2222");
    /* a chief: TensorFlow's worker 0, then the workers; keys in any order */
    good("{\"task\": {\"index\": 1, \"type\": \"worker\"}, \"cluster\": {\"worker\": [\"w0:1\", \"w1:2\"], "
         "\"chief\": [\"c:3\"]}}", 2, 3, 0, 1, "c:3,w0:1,w1:2");
    good("{\"cluster\": {\"chief\": [\"c:3\"], \"worker\": [\"w0:1\"]}, \"task\": {\"type\": \"chief\", \"index\": 0}}",
         0, 2, 0, 1, "c:3,w0:1");
    good("{\"cluster\": {\"master\": [\"m:3\"], \"worker\": [\"w0:1\"]}, \"task\": {\"type\": \"master\", \"index\": 0}}",
         0, 2, 0, 1, "m:3,w0:1");
    /* several workers on one host: local ranks among the same host name */
    good("{\"cluster\": {\"worker\": [\"127.0.0.1:5000\", \"h:1\", \"127.0.0.1:5001\", \"127.0.0.1:5002\"]}, "
         "\"task\": {\"type\": \"worker\", \"index\": 2}}", 2, 4, 1, 3,
         "127.0.0.1:5000,h:1,127.0.0.1:5001,127.0.0.1:5002");
    good("{\"cluster\": {\"worker\": [\"[::1]:5000\", \"[::1]:5001\"]}, \"task\": {\"type\": \"worker\", \"index\": 1}}",
         1, 2, 1, 2, "[::1]:5000,[::1]:5001");
    /* what AI Platform and Vertex add, an evaluator outside the cluster, an empty ps list: skipped */
    good("{\"cluster\": {\"worker\": [\"a:1\"], \"ps\": [], \"evaluator\": [\"e:9\"]}, \"environment\": \"cloud\", "
         "\"job\": {\"args\": [\"--x\", 1.5e3, true, null, {\"k\": [false]}]}, \"rpc_layer\": \"grpc\", "
         "\"task\": {\"type\": \"worker\", \"index\": 0, \"trial\": \"1\", \"cloud\": \"x\\u00e9\\n\"}}",
         0, 1, 0, 1, "a:1");
    good(" \n\t{\"cluster\":{\"worker\":[\"a\\u003a1\"]},\"task\":{\"type\":\"worker\",\"index\":0}} \n", 0, 1, 0, 1,
         "a:1");

    /* ---- refused, naming what was wrong ---- */
    refused("", "expected a JSON object");
    refused("[]", "expected a JSON object");
    refused("{\"cluster\": {\"worker\": [\"a:1\"]}, \"task\": {\"type\": \"worker\", \"index\": 0}", "expected ','");
    refused("{\"cluster\": {\"worker\": [\"a:1\",]}, \"task\": {\"type\": \"worker\", \"index\": 0}}",
            "expected a string");
    refused("{\"cluster\": {\"worker\": [\"a:1\"]}, \"task\": {\"type\": \"worker\", \"index\": 0}} x",
            "text after the JSON object");
    refused("{\"cluster\": {\"worker\": [\"a:1\"]}, \"task\": {\"type\": \"worker\", \"index\": 0}}{}",
            "text after the JSON object");
    refused("{\"cluster\": {\"worker\": [\"a:1", "unterminated string");
    refused("{\"cluster\": {\"worker\": [\"a:1\"]}, \"task\": {\"type\": \"worker\", \"index\": 1}}",
            "task worker 1: cluster.worker has 1 address");
    refused("{\"cluster\": {\"worker\": [\"a:1\"]}, \"task\": {\"type\": \"worker\", \"index\": -1}}",
            "task.index: expected an integer");
    refused("{\"cluster\": {\"worker\": [\"a:1\"]}, \"task\": {\"type\": \"worker\", \"index\": 0.5}}",
            "task.index: expected an integer");
    refused("{\"cluster\": {\"worker\": [\"a:1\"]}, \"task\": {\"type\": \"worker\", \"index\": \"0\"}}",
            "expected a number");
    refused("{\"cluster\": {\"worker\": [\"a:1\"]}, \"task\": {\"type\": \"worker\", \"index\": 01}}",
            "expected a number");
    refused("{\"cluster\": {\"worker\": [\"a:1\"]}, \"task\": {\"type\": \"worker\", \"index\": 99999999999}}",
            "task.index: expected an integer");
    refused("{\"cluster\": {\"worker\": [\"a:1\"], \"ps\": [\"p:1\"]}, \"task\": {\"type\": \"worker\", \"index\": 0}}",
            "cluster.ps: parameter servers");
    refused("{\"cluster\": {\"worker\": [\"a:1\"]}, \"task\": {\"type\": \"evaluator\", \"index\": 0}}",
            "task.type \"evaluator\"");
    refused("{\"cluster\": {\"worker\": [\"a:1\"]}, \"task\": {\"type\": \"ps\", \"index\": 0}}", "task.type \"ps\"");
    refused("{\"cluster\": {\"chief\": [\"c:1\", \"d:1\"], \"worker\": []}, \"task\": {\"type\": \"chief\", \"index\": 0}}",
            "more than one chief");
    refused("{\"cluster\": {\"worker\": [\"a:1\"]}, \"task\": {\"type\": \"chief\", \"index\": 0}}",
            "the cluster has 0 chief");
    refused("{\"cluster\": {\"worker\": [\"a:1\"], \"worker\": [\"b:1\"]}, \"task\": {\"type\": \"worker\", \"index\": 0}}",
            "a second worker list");
    refused("{\"cluster\": {\"worker\": [\"a:1\"]}, \"cluster\": {}, \"task\": {\"type\": \"worker\", \"index\": 0}}",
            "a key given twice");
    refused("{\"cluster\": {\"worker\": {\"0\": \"a:1\"}}, \"task\": {\"type\": \"worker\", \"index\": 0}}",
            "cluster.worker: expected a list");
    refused("{\"cluster\": {\"trainer\": [\"a:1\"]}, \"task\": {\"type\": \"worker\", \"index\": 0}}",
            "a job other than chief");
    refused("{\"cluster\": {\"worker\": [\"a\"]}, \"task\": {\"type\": \"worker\", \"index\": 0}}",
            "cluster.worker[0]: expected \"host:port\"");
    refused("{\"cluster\": {\"worker\": [\"a:1\", \"b:0\"]}, \"task\": {\"type\": \"worker\", \"index\": 0}}",
            "cluster.worker[1]: expected \"host:port\"");
    refused("{\"cluster\": {\"worker\": [\"a:65536\"]}, \"task\": {\"type\": \"worker\", \"index\": 0}}",
            "expected \"host:port\"");
    refused("{\"cluster\": {\"worker\": [\":1\"]}, \"task\": {\"type\": \"worker\", \"index\": 0}}",
            "expected \"host:port\"");
    refused("{\"cluster\": {\"worker\": [\"a,b:1\"]}, \"task\": {\"type\": \"worker\", \"index\": 0}}",
            "expected \"host:port\"");
    refused("{\"cluster\": {\"worker\": [\"a:1x\"]}, \"task\": {\"type\": \"worker\", \"index\": 0}}",
            "expected \"host:port\"");
    refused("{\"cluster\": {\"worker\": [\"h\\u00e9:1\"]}, \"task\": {\"type\": \"worker\", \"index\": 0}}",
            "printable ASCII");
    refused("{\"cluster\": {\"worker\": [\"a:1\\q\"]}, \"task\": {\"type\": \"worker\", \"index\": 0}}",
            "an unknown escape");
    refused("{\"cluster\": {\"worker\": [\"a:1\\u12\"]}, \"task\": {\"type\": \"worker\", \"index\": 0}}",
            "4 hex digits");
    refused("{\"cluster\": {\"worker\": [\"a\n:1\"]}, \"task\": {\"type\": \"worker\", \"index\": 0}}",
            "a control character");
    refused("{\"cluster\": {\"worker\": [\"a:1\"]}}", "needs cluster");
    refused("{\"task\": {\"type\": \"worker\", \"index\": 0}}", "needs cluster");
    refused("{\"cluster\": {\"worker\": [\"a:1\"]}, \"task\": {\"type\": \"worker\"}}", "needs cluster");
    refused("{\"cluster\": {\"worker\": [\"a:1\"]}, \"task\": {\"type\": \"worker\", \"index\": 0}, \"x\": tru}",
            "expected a JSON value");
    refused("{\"cluster\": {\"worker\": [\"a:1\"]}, \"task\": {\"type\": \"worker\", \"index\": 0}, \"x\": 1.}",
            "expected a digit after '.'");
    /* nesting past the bound, and a value longer than 1 MiB */
    char deep[200] = "{\"x\": ";
    for (int i = 0; i < 40; i++)
        strcat(deep, "[");
    refused(deep, "nested too deep");
    size_t big = (1 << 20) + 16;
    char *huge = malloc(big + 1);
    memset(huge, ' ', big);
    huge[big] = 0;
    refused(huge, "longer than");
    free(huge);
    /* more addresses than a ddl_comm_env's peers hold */
    size_t n = 800 * 32 + 200;
    char *many = malloc(n);
    strcpy(many, "{\"cluster\": {\"worker\": [");
    for (int i = 0; i < 800; i++)
        sprintf(many + strlen(many), "%s\"host-%04d.example:2222\"", i ? "," : "", i);
    strcat(many, "]}, \"task\": {\"type\": \"worker\", \"index\": 0}}");
    refused(many, "set DDL_PEERS instead");
    free(many);

    /* ---- in the environment: TF_CONFIG alone; DDL_ variables and other launchers win ---- */
    const char *tf = "{\"cluster\": {\"worker\": [\"127.0.0.1:7000\", \"127.0.0.1:7001\"]}, "
                     "\"task\": {\"type\": \"worker\", \"index\": 1}}";
    char err[256];
    setenv("TF_CONFIG", tf, 1);
    int rc = ddl_comm_config_from_env(&cfg, &env, err, sizeof err);
    CHECK(rc == DDL_OK && cfg.rank == 1 && cfg.world_size == 2 && cfg.local_rank == 1 && cfg.local_size == 2);
    CHECK(rc == DDL_OK && cfg.peers && strcmp(cfg.peers, "127.0.0.1:7000,127.0.0.1:7001") == 0);
    CHECK(rc == DDL_OK && cfg.transport && strcmp(cfg.transport->name, "shm") == 0); /* one host */
    /* the peers are text built into the caller's env: without one, refused, saying so */
    rc = ddl_comm_config_from_env(&cfg, NULL, err, sizeof err);
    CHECK(rc == DDL_EINVAL && strstr(err, "the peers from TF_CONFIG") && strstr(err, "ddl_comm_env") && !cfg.peers);
    setenv("DDL_LOCAL_RANK", "0", 1);
    setenv("DDL_LOCAL_SIZE", "1", 1);
    rc = ddl_comm_config_from_env(&cfg, &env, err, sizeof err);
    CHECK(rc == DDL_OK && cfg.rank == 1 && cfg.local_rank == 0 && cfg.local_size == 1 && cfg.transport &&
          strcmp(cfg.transport->name, "tcp") == 0); /* DDL_LOCAL_*: "another host": tcp */
    unsetenv("DDL_LOCAL_RANK");
    unsetenv("DDL_LOCAL_SIZE");
    setenv("DDL_RANK", "0", 1);
    setenv("DDL_WORLD_SIZE", "1", 1);
    rc = ddl_comm_config_from_env(&cfg, &env, err, sizeof err);
    CHECK(rc == DDL_OK && cfg.rank == 0 && cfg.world_size == 1 && !cfg.peers); /* DDL_RANK wins */
    unsetenv("DDL_RANK");
    unsetenv("DDL_WORLD_SIZE");
    setenv("DDL_PEERS", "x:1,y:2,z:3", 1);
    rc = ddl_comm_config_from_env(&cfg, &env, err, sizeof err);
    CHECK(rc == DDL_OK && cfg.world_size == 1 && cfg.peers && strcmp(cfg.peers, "x:1,y:2,z:3") == 0);
    unsetenv("DDL_PEERS");
    setenv("RANK", "0", 1);
    setenv("WORLD_SIZE", "3", 1);
    rc = ddl_comm_config_from_env(&cfg, &env, err, sizeof err);
    CHECK(rc == DDL_OK && cfg.world_size == 3 && !cfg.peers); /* torchrun's variables win */
    unsetenv("RANK");
    unsetenv("WORLD_SIZE");
    setenv("TF_CONFIG", "{\"cluster\": {\"worker\": [\"a:1\"]}, \"task\": {\"type\": \"ps\", \"index\": 0}}", 1);
    rc = ddl_comm_config_from_env(&cfg, &env, err, sizeof err);
    CHECK(rc == DDL_EINVAL && strstr(err, "TF_CONFIG: task.type \"ps\""));
    setenv("TF_CONFIG", "", 1); /* empty: as unset */
    rc = ddl_comm_config_from_env(&cfg, &env, err, sizeof err);
    CHECK(rc == DDL_OK && cfg.world_size == 1 && !cfg.peers);
    unsetenv("TF_CONFIG");
    return TEST_END();
}
