/* piecewise LLM API: libpiecewise-llm, the inference engine built on the
 * capture library. Link libpiecewise-llm (pkg-config piecewise-llm, CMake
 * piecewise::llm), which brings libpiecewise.
 *
 * This header declares the whole capture library (piecewise.h: core,
 * graph, runtime) and the LLM API on top of it (piecewise/model.h: GGUF
 * models, tokenizer, chat templates, engine). piecewise.h alone does not
 * declare the LLM API, so a program that includes only it and calls the
 * engine fails to compile rather than to link. */
#ifndef PIECEWISE_LLM_H
#define PIECEWISE_LLM_H

#include "piecewise.h"
#include "piecewise/model.h"

#endif /* PIECEWISE_LLM_H */
