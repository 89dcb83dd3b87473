// run_guard.h — checks on a run's outputs made at start, before anything large is allocated or the
// first iteration runs, so that a bad path fails in a second instead of at the first checkpoint;
// and a lock that keeps two runs off one save folder. Errors name the setting and the path.
#ifndef KDA_RUN_GUARD_H
#define KDA_RUN_GUARD_H

// DIR (the setting KEY, e.g. "save") is a folder this process can write in: created if missing
// (with its parents); a file, or a folder without write permission, is an error.
void kda_guard_dir(const char *key, const char *dir);
// PATH (setting KEY, e.g. "metrics_file" or "--output") can be written: not a folder, and its
// folder exists (or is created) and is writable. PATH itself is neither created nor changed.
void kda_guard_file(const char *key, const char *path);
// An output OUT (setting KEY) that a command would replace or move aside must not be the input IN
// nor a folder that holds it: when both exist and OUT resolves to IN or to one of IN's parent
// folders, dies naming both (`kda export CK CK --force` would otherwise delete the checkpoint).
void kda_guard_not_input(const char *key, const char *out, const char *in);
// Takes an exclusive lock on DIR/.lock (flock, held until the process exits: a crashed or killed
// run leaves no stale lock). A second run on DIR fails at once, naming the holder's pid.
void kda_guard_lock(const char *key, const char *dir);
#endif
