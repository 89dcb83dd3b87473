// plot.h — `kda plot`: training curves from metrics JSON lines as one SVG file.
//
// Reads rows of one or more metrics files (kda train's metrics_file, or another trainer's log
// converted to the same keys): "iteration" with any of "loss" (training loss), "val_loss"
// (validation loss), "lr", "tokens_per_s". Draws three panels against iterations — loss
// (training solid, validation dashed), learning rate, tokens/s — with axes, ticks, labels and a
// legend naming each file, one colour per file. Rows without "iteration" (a header) are skipped.
// Plain SVG 1.1 that browsers open; written atomically (temporary file, then rename).
#ifndef KDA_PLOT_H
#define KDA_PLOT_H

typedef struct {
    const char *path;  // metrics JSON lines
    const char *label; // legend text (NULL: the file name)
} kda_plot_input;

// Dies with a message naming the file and line on unreadable input or when a file holds no
// plottable row. Returns the number of points drawn.
long kda_plot_svg(const kda_plot_input *in, int n, const char *out_path, const char *title);

#endif
