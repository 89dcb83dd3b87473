// version.h — what this kda is: the release (VERSION), the git commit it was built from and
// whether the tree was modified, and the CUDA architectures built in. The same string goes to
// `kda --version`, every checkpoint and the metrics header.
#ifndef KDA_VERSION_H
#define KDA_VERSION_H

// "kda 0.12.0 (commit 0123456789ab, modified; CUDA 80 86 89 90a 100 + PTX 100)"
const char *kda_version_string(void);
const char *kda_release(void);
const char *kda_git_commit(void); // "0123456789ab" or "0123456789ab-modified"

#endif
