/* piecewise public API: graph layer. Included by piecewise.h; do not include directly. */
#ifndef PIECEWISE_GRAPH_H
#define PIECEWISE_GRAPH_H

#include "piecewise.h"

#ifdef __cplusplus
extern "C" {
#endif

#ifdef __cplusplus
}
#endif
#endif
