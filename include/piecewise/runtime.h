/* piecewise public API: runtime layer. Included by piecewise.h; do not include directly. */
#ifndef PIECEWISE_RUNTIME_H
#define PIECEWISE_RUNTIME_H

#include "piecewise.h"

#ifdef __cplusplus
extern "C" {
#endif

#ifdef __cplusplus
}
#endif
#endif
