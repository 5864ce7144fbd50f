/*
 * admin/main.c — llmadmin's entry point: global options, then one command
 * looked up in a table.
 *
 * The global options (--db, --socket, --json, --help, --version) may stand
 * anywhere on the line, so they are taken out first and what remains is the
 * command and its own arguments.  Every command is a row of adm_cmds: DB
 * commands first, then the live ones over the daemon's admin socket.
 */
#include "admin/adm.h"

#include <stdlib.h>
#include <string.h>

static const struct adm_cmd adm_cmds[] = {
    {"init", "init", "create the DB, or bring its schema up to date (idempotent)", adm_cmd_init},
    {"tenant",
     "tenant add NAME [--weight W] [--priority P] [--max-priority P] [--max-concurrent N]\n"
     "                [--rpm N] [--tpm N] [--max-kv-blocks N] [--max-tokens N]\n"
     "tenant set NAME [same options as add]\n"
     "tenant list\n"
     "tenant disable|enable NAME",
     "tenants, their priorities and quotas (0: no cap)", adm_cmd_tenant},
    {"key",
     "key create TENANT [--name LABEL] [--expires YYYY-MM-DD|+Nd]\n"
     "key list [--tenant NAME]\n"
     "key revoke ID|PREFIX",
     "API keys: a new key is printed once, only its hash is kept", adm_cmd_key},
    {"usage", "usage [--tenant NAME] [--since YYYY-MM-DD|-Nd|-Nh] [--rows N]",
     "totals per tenant, or the N newest ledger rows", adm_cmd_usage},
    {"status", "status", "the running daemon: model, KV blocks, queues per priority and tenant",
     adm_cmd_status},
    {"queues", "queues [--tenant NAME]", "every request the engine holds, and its state",
     adm_cmd_queues},
    {"blocks", "blocks [REQUEST]", "a map of the device KV blocks, or one request's block table",
     adm_cmd_blocks},
    {"drain", "drain [--wait [--timeout SECONDS]]",
     "refuse new requests and let running ones finish (--wait: until none is left)", adm_cmd_drain},
    {"undrain", "undrain", "accept new requests again", adm_cmd_undrain},
    {"evict", "evict REQUEST|--tenant NAME [--abort]",
     "preempt requests off the device (--abort: end them with an error)", adm_cmd_evict},
    {"top", "top [-d SECONDS]", "status and queues, refreshed every second (q quits)", adm_cmd_top},
};
#define ADM_N_CMDS ((int)(sizeof(adm_cmds) / sizeof(*adm_cmds)))

static void adm_help(void)
{
    printf("usage: llmadmin [--db PATH] [--socket PATH] [--json] COMMAND ...\n\n"
           "Manages llmd's tenants, API keys and usage ledger, and watches and steers\n"
           "the running daemon.  DB commands (init, tenant, key, usage) work on the DB\n"
           "file directly, whether or not the daemon runs; it picks up changes within\n"
           "a second.  Live commands (status, queues, blocks, drain, undrain, evict,\n"
           "top) talk to the daemon over its admin socket.\n\nCommands:\n");
    for (int i = 0; i < ADM_N_CMDS; i++) {
        printf("\n  %s: %s\n", adm_cmds[i].name, adm_cmds[i].help);
        const char *s = adm_cmds[i].synopsis;
        while (*s) {
            size_t n = strcspn(s, "\n");
            printf("    llmadmin %.*s\n", (int)n, s);
            s += n + (s[n] == '\n');
        }
    }
    printf("\nOptions (anywhere on the line):\n"
           "  --db PATH       the DB file (default: $LLMD_DB, else %s)\n"
           "  --socket PATH   the admin socket (default: $LLMD_ADMIN_SOCKET, else\n"
           "                  %s)\n"
           "  --json          print one JSON value instead of tables\n"
           "  --help          print this help\n"
           "  --version       print the version\n\n"
           "Exit status: 0 done, 1 failed (the reason on stderr), 2 usage error.\n",
           ADM_DEFAULT_DB, ADM_DEFAULT_SOCKET);
}

/* What the global options asked for besides running a command. */
enum adm_want { ADM_RUN, ADM_HELP, ADM_VERSION };

/* Takes the global options out of argv (compacting it in place, argv[0]
 * dropped); *argc becomes the count left.  ADM_OK or ADM_USAGE. */
static int adm_globals(struct adm_ctx *c, int *argc, char **argv, enum adm_want *want)
{
    int n = 0, done = 0;
    for (int i = 1; i < *argc; i++) {
        const char *a = argv[i];
        if (done || strncmp(a, "--", 2) != 0) {
            argv[n++] = argv[i];
            done |= strcmp(a, "--") == 0;
        } else if (strcmp(a, "--json") == 0) {
            c->json = 1;
        } else if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0) {
            *want = ADM_HELP;
        } else if (strcmp(a, "--version") == 0) {
            *want = *want == ADM_HELP ? ADM_HELP : ADM_VERSION;
        } else if (strncmp(a, "--db=", 5) == 0) {
            c->db_path = a + 5;
        } else if (strcmp(a, "--db") == 0) {
            if (i + 1 >= *argc)
                return adm_usage(NULL, "option '--db' needs a value");
            c->db_path = argv[++i];
        } else if (strncmp(a, "--socket=", 9) == 0) {
            c->socket_path = a + 9;
        } else if (strcmp(a, "--socket") == 0) {
            if (i + 1 >= *argc)
                return adm_usage(NULL, "option '--socket' needs a value");
            c->socket_path = argv[++i];
        } else {
            argv[n++] = argv[i];
        }
    }
    *argc = n;
    return ADM_OK;
}

int main(int argc, char **argv)
{
    struct adm_ctx c = {0};
    const char *env = getenv("LLMD_DB");
    c.db_path = env && *env ? env : ADM_DEFAULT_DB;
    env = getenv("LLMD_ADMIN_SOCKET");
    c.socket_path = env && *env ? env : ADM_DEFAULT_SOCKET;
    enum adm_want want = ADM_RUN;
    if (adm_globals(&c, &argc, argv, &want) != ADM_OK)
        return ADM_USAGE;
    if (want == ADM_HELP) {
        adm_help();
        return ADM_OK;
    }
    if (want == ADM_VERSION) {
        printf("llmadmin %s\n", LLMD_VERSION);
        return ADM_OK;
    }
    if (argc == 0)
        return adm_usage(NULL, "missing command (try 'llmadmin --help')");
    if (!*c.db_path)
        return adm_usage(NULL, "--db: empty path");
    if (!*c.socket_path)
        return adm_usage(NULL, "--socket: empty path");
    for (int i = 0; i < ADM_N_CMDS; i++)
        if (strcmp(argv[0], adm_cmds[i].name) == 0) {
            c.usage = adm_cmds[i].synopsis;
            return adm_cmds[i].run(&c, argc, argv);
        }
    return adm_usage(NULL, "unknown command '%s' (try 'llmadmin --help')", argv[0]);
}
