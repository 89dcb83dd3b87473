// version.c — see version.h. The facts come from the header the Makefile generates
// (tools/gen_build_h.sh) at every build.
#include "base/version.h"

#include <stdio.h>

#include "kda_build.h"

const char *kda_release(void) { return KDA_RELEASE; }

const char *kda_git_commit(void) { return KDA_GIT_MODIFIED ? KDA_GIT_COMMIT "-modified" : KDA_GIT_COMMIT; }

const char *kda_version_string(void) {
    static char buf[256];
    snprintf(buf, sizeof buf, "kda %s (commit %s%s; %s%s)", KDA_RELEASE, KDA_GIT_COMMIT,
             KDA_GIT_MODIFIED ? ", modified" : "", KDA_BUILT_CUDA[0] ? "CUDA " : "no CUDA", KDA_BUILT_CUDA);
    return buf;
}
