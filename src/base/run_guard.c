// run_guard.c — output checks at start and the save-folder lock (run_guard.h).
#include "base/run_guard.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/common.h"

static void mkdirs(const char *key, const char *dir) {
    char buf[4096];
    if (snprintf(buf, sizeof buf, "%s", dir) >= (int)sizeof buf) kda_die("%s: path '%.80s...' is too long", key, dir);
    for (char *p = buf + 1; *p; p++) {
        if (*p != '/') continue;
        *p = 0;
        if (mkdir(buf, 0755) != 0 && errno != EEXIST)
            kda_die("%s '%s': cannot create folder '%s': %s", key, dir, buf, strerror(errno));
        *p = '/';
    }
    if (mkdir(buf, 0755) != 0 && errno != EEXIST)
        kda_die("%s '%s': cannot create the folder: %s", key, dir, strerror(errno));
}

void kda_guard_dir(const char *key, const char *dir) {
    struct stat st;
    if (stat(dir, &st) == 0 && !S_ISDIR(st.st_mode))
        kda_die("%s '%s' is a file, not a folder; name a folder (it is created if missing)", key, dir);
    mkdirs(key, dir);
    if (stat(dir, &st) != 0 || !S_ISDIR(st.st_mode))
        kda_die("%s '%s': a path component is a file, not a folder; name a folder", key, dir);
    // a probe file: access(W_OK) misses read-only mounts and ACLs
    char probe[4200];
    snprintf(probe, sizeof probe, "%s/.kda-write-probe.%ld", dir, (long)getpid());
    int fd = open(probe, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (fd < 0)
        kda_die("%s '%s' is not writable (%s); choose a folder you can write in or fix its permissions", key, dir,
                strerror(errno));
    close(fd);
    unlink(probe);
}

void kda_guard_file(const char *key, const char *path) {
    struct stat st;
    if (!path || !*path) kda_die("%s is empty; name a file", key);
    if (stat(path, &st) == 0 && S_ISDIR(st.st_mode)) kda_die("%s '%s' is a folder; name a file", key, path);
    char dir[4096];
    snprintf(dir, sizeof dir, "%s", path);
    char *slash = strrchr(dir, '/');
    if (!slash)
        snprintf(dir, sizeof dir, ".");
    else if (slash == dir)
        dir[1] = 0;
    else
        *slash = 0;
    if (stat(dir, &st) == 0 && !S_ISDIR(st.st_mode))
        kda_die("%s '%s': '%s' is a file, not a folder; choose another path", key, path, dir);
    mkdirs(key, dir);
    if (access(path, F_OK) == 0 ? access(path, W_OK) != 0 : access(dir, W_OK) != 0)
        kda_die("%s '%s' cannot be written (%s); choose another path or fix the permissions", key, path,
                strerror(errno));
}

void kda_guard_not_input(const char *key, const char *out, const char *in) {
    char *o = realpath(out, NULL), *i = realpath(in, NULL);
    size_t n = o ? strlen(o) : 0;
    int holds = o && i && !strncmp(o, i, n) && (i[n] == 0 || i[n] == '/' || (n == 1 && o[0] == '/'));
    free(o);
    free(i);
    if (holds) kda_die("%s '%s' is, or holds, the input '%s'; choose another %s", key, out, in, key);
}

void kda_guard_lock(const char *key, const char *dir) {
    char path[4200];
    snprintf(path, sizeof path, "%s/.lock", dir);
    int fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0644);
    if (fd < 0) kda_die("%s '%s': cannot create the lock file '%s': %s", key, dir, path, strerror(errno));
    if (flock(fd, LOCK_EX | LOCK_NB) != 0) {
        char pid[32] = "?";
        ssize_t n = pread(fd, pid, sizeof pid - 1, 0);
        if (n > 0) pid[n] = 0;
        pid[strcspn(pid, "\n")] = 0;
        kda_die("%s '%s' is in use by another run (pid %s holds %s); wait for it to end, stop it, or choose another "
                "%s",
                key, dir, pid, path, key);
    }
    char buf[32];
    int n = snprintf(buf, sizeof buf, "%ld\n", (long)getpid());
    if (ftruncate(fd, 0) != 0 || pwrite(fd, buf, (size_t)n, 0) != n) { /* the pid is informational only */
    }
    // fd stays open: the lock lives as long as the process
}
