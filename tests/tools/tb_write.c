// tb_write DIR TAG STEP VALUE [TAG STEP VALUE]... — writes scalars with the TensorBoard writer
// (src/train/tensorboard.h) and prints the event file's path (for tests/python/test_tensorboard.py).
#include <stdio.h>
#include <stdlib.h>

#include "train/tensorboard.h"

int main(int argc, char **argv) {
    if (argc < 2 || (argc - 2) % 3) {
        fprintf(stderr, "usage: tb_write DIR [TAG STEP VALUE]...\n");
        return 2;
    }
    kda_tb *tb = kda_tb_open(argv[1]);
    for (int i = 2; i + 2 < argc; i += 3) kda_tb_scalar(tb, argv[i], atoll(argv[i + 1]), atof(argv[i + 2]));
    printf("%s\n", kda_tb_path(tb));
    kda_tb_close(tb);
    return 0;
}
