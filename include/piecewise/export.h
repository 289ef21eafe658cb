/* piecewise public API: the export macro. Included by every public header.
 *
 * The shared libraries (libpiecewise, libpiecewise-llm) are built with
 * hidden visibility; PW_API marks the functions of this API, the only ones
 * they export. Define PW_API before including a piecewise header to override
 * it (e.g. as empty). */
#ifndef PIECEWISE_EXPORT_H
#define PIECEWISE_EXPORT_H

#ifndef PW_API
#if defined(__GNUC__) || defined(__clang__)
#define PW_API __attribute__((visibility("default")))
#else
#define PW_API
#endif
#endif

#endif /* PIECEWISE_EXPORT_H */
