// model_impl.h — private to model*.c: what model.c (buffers, forward, backward, decoding) and
// model_params.c (the parameter table and its initialisation) share.
#ifndef KDA_MODEL_IMPL_H
#define KDA_MODEL_IMPL_H

#include <stddef.h>

#include "model/model.h"

// Floats one parameter tensor of numel elements takes in the flat buffers: rounded up to 16 (64
// bytes), so that every tensor starts aligned for vector loads on every backend.
static inline size_t kda_param_span(size_t numel) { return (numel + 15) & ~(size_t)15; }
// The aligned end of a tensor's floats (a tensor inside a layer's projection group may start
// unaligned: model_params.c).
static inline size_t kda_param_end(const kda_param *p) { return kda_param_span(p->offset + p->numel); }

// Fills m's parameter table from m->cfg: m->params (FLA's order, names and shapes), m->layer,
// m->embed, m->final_norm and m->n_floats. Allocates params and layer (kda_model_free frees them).
void kda_model_register_params(kda_model *m);

#endif
