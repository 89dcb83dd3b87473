// tensorboard.h — scalars in TensorBoard's event-file format, written by kda itself.
//
// A run's folder gets one file events.out.tfevents.<unix time>.<host>.<pid>: TFRecord framing
// (length, masked CRC-32C of the length, the record, masked CRC-32C of the record) around
// tensorflow.Event protocol buffers: first a file_version "brain.Event:2" event, then one event
// per scalar (wall_time, step, summary { value { tag, simple_value } }). TensorBoard, and
// anything that reads its folders (Weights & Biases' sync_tensorboard), shows them as they are
// written. Why our own writer: the format is four varint/fixed fields in a 16-byte frame, and no
// Debian C library writes it (the TensorFlow C API is far larger than the whole of kda).
// Errors (folder not creatable, disk full) die naming the file.
#ifndef KDA_TENSORBOARD_H
#define KDA_TENSORBOARD_H

#include <stddef.h>
#include <stdint.h>

typedef struct kda_tb kda_tb;

// Creates dir (and its parents) when missing and a new event file in it.
kda_tb *kda_tb_open(const char *dir);
// One scalar at a step; wall time = now.
void kda_tb_scalar(kda_tb *tb, const char *tag, int64_t step, double value);
// Pushes what was written to the file (a reader sees it); kda_tb_close flushes too.
void kda_tb_flush(kda_tb *tb);
void kda_tb_close(kda_tb *tb);
const char *kda_tb_path(const kda_tb *tb);

// The CRC-32C (Castagnoli) of n bytes, and TFRecord's masking of it (exposed for the tests).
uint32_t kda_crc32c(const void *p, size_t n);
uint32_t kda_tb_masked_crc(uint32_t crc);

#endif
