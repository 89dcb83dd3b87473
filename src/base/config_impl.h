// config_impl.h — private to config*.c: the key table that drives loading, --set overrides
// (config.c) and writing (config_write.c).
#ifndef KDA_CONFIG_IMPL_H
#define KDA_CONFIG_IMPL_H

#include <stddef.h>

#include "base/config.h"

typedef enum { K_INT, K_LONG, K_DOUBLE, K_BOOL, K_STR, K_PATHS } key_type;

typedef struct {
    const char *name;
    key_type type;
    size_t off;       // offset of the field
    size_t size;      // K_STR: buffer size; K_PATHS: size of one path buffer
    size_t count_off; // K_PATHS: offset of the count field
    int nullable;     // K_INT: YAML null is accepted and stored as null_value
    int null_value;
    const char *section; // comment written before the first key of each section
} key_def;

// Every field of kda_config, in the order kda_config_write_yaml writes them (config.c).
extern const key_def cfg_keys[];
extern const size_t cfg_n_keys;

#endif
