/*
 * db/writer.c — the usage writer: a thread with its own connection that
 * commits queued records in batches, off the daemon's I/O path.
 *
 * The I/O thread only appends to a locked FIFO and signals.  Each time the
 * writer wakes it takes everything queued (up to DB_BATCH_MAX records) and
 * commits it in one transaction, then runs each record's done callback,
 * outside the lock, after the commit.  "seq" numbers make flush exact: a
 * record pushed as number k is settled (committed or failed, callback run)
 * once "settled" reaches k, whatever batches it travelled in.
 */
#include "db/db_int.h"

#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define DB_BATCH_MAX  1024 /* records per transaction: bounds the lock hold time */
#define DB_BUSY_TRIES 4    /* commits tried (each waits up to the busy timeout) */

struct db_wnode {
    struct db_wnode *next;
    struct db_usage u;
    db_done_fn done;
    void *arg;
};

struct db_writer {
    struct db *d; /* used by the thread only */
    pthread_t thread;
    pthread_mutex_t mu;
    pthread_cond_t wake;    /* the thread waits for records or stop */
    pthread_cond_t settled; /* flush waits for a batch to settle */
    struct db_wnode *head, *tail;
    int queued;
    int stopping;
    uint64_t pushed, done_seq; /* records pushed / settled, ever */
    long rows, batches, failed;
    struct db_usage *batch; /* the thread's copy of one batch */
    char last_err[256];     /* why the last failed batch failed (under mu) */
};

/* Detaches up to DB_BATCH_MAX records from the head of the queue (mu held). */
static struct db_wnode *db_writer_take(struct db_writer *w, int *n)
{
    struct db_wnode *first = w->head, *last = NULL, *p = w->head;
    int k = 0;
    for (; p && k < DB_BATCH_MAX; p = p->next, k++)
        last = p;
    if (last) {
        w->head = last->next;
        last->next = NULL;
        if (!w->head)
            w->tail = NULL;
    }
    w->queued -= k;
    *n = k;
    return first;
}

/* Commits n records; retries while the database is busy (another process,
 * e.g. llmadmin, holding the write lock past the busy timeout). */
static int db_writer_commit(struct db_writer *w, struct db_wnode *list, int n)
{
    int i = 0;
    for (struct db_wnode *p = list; p; p = p->next)
        w->batch[i++] = p->u;
    char err[256];
    for (int t = 0; t < DB_BUSY_TRIES; t++) {
        int rc = db_usage_insert_rc(w->d, w->batch, n, err, sizeof(err));
        if (rc == SQLITE_OK)
            return 1;
        if ((rc & 0xff) != SQLITE_BUSY && (rc & 0xff) != SQLITE_LOCKED)
            break;
        nanosleep(&(struct timespec){.tv_nsec = 100 * 1000 * 1000}, NULL);
    }
    pthread_mutex_lock(&w->mu);
    snprintf(w->last_err, sizeof(w->last_err), "%s", err);
    pthread_mutex_unlock(&w->mu);
    return 0;
}

static void db_writer_batch(struct db_writer *w, struct db_wnode *list, int n)
{
    int ok = db_writer_commit(w, list, n);
    while (list) {
        struct db_wnode *next = list->next;
        if (list->done)
            list->done(list->arg, ok);
        free(list);
        list = next;
    }
    pthread_mutex_lock(&w->mu);
    w->done_seq += (uint64_t)n;
    w->batches++;
    if (ok)
        w->rows += n;
    else
        w->failed += n;
    pthread_cond_broadcast(&w->settled);
    pthread_mutex_unlock(&w->mu);
}

/* Runs until stopped and the queue is empty: a stop never drops a record. */
static void *db_writer_main(void *arg)
{
    struct db_writer *w = arg;
    pthread_mutex_lock(&w->mu);
    for (;;) {
        while (!w->head && !w->stopping)
            pthread_cond_wait(&w->wake, &w->mu);
        if (!w->head)
            break;
        int n;
        struct db_wnode *list = db_writer_take(w, &n);
        pthread_mutex_unlock(&w->mu);
        db_writer_batch(w, list, n);
        pthread_mutex_lock(&w->mu);
    }
    pthread_mutex_unlock(&w->mu);
    return NULL;
}

/* The thread blocks every signal, so that they reach the daemon's own
 * handling (libevent's signal events) and never interrupt a commit. */
static int db_writer_spawn(struct db_writer *w)
{
    sigset_t all, old;
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &old);
    int rc = pthread_create(&w->thread, NULL, db_writer_main, w);
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    return rc;
}

int db_writer_start(const char *path, struct db_writer **out, char *err, size_t errlen)
{
    *out = NULL;
    struct db_writer *w = calloc(1, sizeof(*w));
    if (!w || !(w->batch = malloc(DB_BATCH_MAX * sizeof(*w->batch)))) {
        free(w);
        db_errf(err, errlen, "db writer: out of memory");
        return -1;
    }
    if (db_open(path, 0, &w->d, err, errlen) < 0) {
        free(w->batch);
        free(w);
        return -1;
    }
    pthread_mutex_init(&w->mu, NULL);
    pthread_cond_init(&w->wake, NULL);
    pthread_cond_init(&w->settled, NULL);
    int rc = db_writer_spawn(w);
    if (rc != 0) {
        db_errf(err, errlen, "db writer: cannot start its thread: %s", strerror(rc));
        pthread_cond_destroy(&w->settled);
        pthread_cond_destroy(&w->wake);
        pthread_mutex_destroy(&w->mu);
        db_close(w->d);
        free(w->batch);
        free(w);
        return -1;
    }
    *out = w;
    return 0;
}

int db_writer_push(struct db_writer *w, const struct db_usage *u, db_done_fn done, void *arg)
{
    struct db_wnode *node = malloc(sizeof(*node));
    if (!node)
        return -1;
    *node = (struct db_wnode){.u = *u, .done = done, .arg = arg};
    pthread_mutex_lock(&w->mu);
    if (w->stopping) {
        pthread_mutex_unlock(&w->mu);
        free(node);
        return -1;
    }
    if (w->tail)
        w->tail->next = node;
    else
        w->head = node;
    w->tail = node;
    w->queued++;
    w->pushed++;
    pthread_cond_signal(&w->wake);
    pthread_mutex_unlock(&w->mu);
    return 0;
}

void db_writer_flush(struct db_writer *w)
{
    pthread_mutex_lock(&w->mu);
    uint64_t target = w->pushed;
    while (w->done_seq < target)
        pthread_cond_wait(&w->settled, &w->mu);
    pthread_mutex_unlock(&w->mu);
}

void db_writer_stop(struct db_writer *w)
{
    if (!w)
        return;
    pthread_mutex_lock(&w->mu);
    w->stopping = 1;
    pthread_cond_signal(&w->wake);
    pthread_mutex_unlock(&w->mu);
    pthread_join(w->thread, NULL);
    pthread_cond_destroy(&w->settled);
    pthread_cond_destroy(&w->wake);
    pthread_mutex_destroy(&w->mu);
    db_close(w->d);
    free(w->batch);
    free(w);
}

void db_writer_stats(struct db_writer *w, struct db_writer_stats *s)
{
    pthread_mutex_lock(&w->mu);
    s->rows = w->rows;
    s->batches = w->batches;
    s->failed = w->failed;
    s->queued = w->queued;
    pthread_mutex_unlock(&w->mu);
}

void db_writer_last_error(struct db_writer *w, char *buf, size_t len)
{
    pthread_mutex_lock(&w->mu);
    snprintf(buf, len, "%s", w->last_err);
    pthread_mutex_unlock(&w->mu);
}
