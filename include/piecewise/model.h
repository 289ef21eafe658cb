/* piecewise public API: model layer. Included by piecewise.h; do not include directly. */
#ifndef PIECEWISE_MODEL_H
#define PIECEWISE_MODEL_H

#include "piecewise.h"

#ifdef __cplusplus
extern "C" {
#endif

#ifdef __cplusplus
}
#endif
#endif
