// test_die.h — run a piece of code that is expected to stop through kda_die, in a child
// process, and look at how it stopped: exit status and the text it wrote to stderr.
#ifndef KDA_TEST_DIE_H
#define KDA_TEST_DIE_H
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

typedef struct {
    int status;     // exit status (128 + signal when killed)
    char err[4096]; // stderr, NUL-terminated (cut at 4095 bytes)
} t_child;

// Runs fn(arg) in a child; a child that returns from fn exits 0.
static inline t_child t_run_child(void (*fn)(void *), void *arg) {
    t_child r;
    memset(&r, 0, sizeof r);
    int fds[2];
    if (pipe(fds) != 0) {
        perror("pipe");
        exit(2);
    }
    fflush(stdout);
    fflush(stderr);
    pid_t pid = fork();
    if (pid < 0) {
        perror("fork");
        exit(2);
    }
    if (pid == 0) {
        close(fds[0]);
        dup2(fds[1], 2);
        fn(arg);
        fflush(stderr);
        _exit(0);
    }
    close(fds[1]);
    size_t n = 0;
    ssize_t k;
    while ((k = read(fds[0], r.err + n, sizeof r.err - 1 - n)) > 0) n += (size_t)k;
    close(fds[0]);
    int st = 0;
    waitpid(pid, &st, 0);
    r.status = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
    return r;
}

// The child failed with exit status 1 (kda_die), wrote one line, and that line holds every
// string in the NULL-terminated list.
static inline int t_died_saying(const t_child *c, const char *const *words) {
    if (c->status != 1) return 0;
    const char *nl = strchr(c->err, '\n');
    if (!nl || nl[1] != 0) return 0;
    for (; *words; words++)
        if (!strstr(c->err, *words)) return 0;
    return 1;
}
#endif
