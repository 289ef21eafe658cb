# Embeds a text file into a library as a C string, at build time.
#
#   include(cmake/pw_embed.cmake)
#   pw_embed_text(<target> <file> <symbol>)
#
# adds to <target> a generated source in the build directory that defines
#
#   const char <symbol>[] = "<the file's bytes>";
#
# and regenerates it whenever the file changes. The code generator uses it
# for src/graph/gen_abi.h, the prelude of every emitted C source, so the
# header the library compiles against and the text it emits are one file.
#
# The same file is the generator: run as a script (cmake -P) with
# PW_EMBED_IN, PW_EMBED_OUT and PW_EMBED_SYMBOL set, it writes the source.

if(CMAKE_SCRIPT_MODE_FILE)
  file(READ "${PW_EMBED_IN}" text)
  # C string escapes, in this order: backslashes first, then quotes; every
  # '?' escaped so that no "??x" reads as a trigraph under -std=c11.
  string(REPLACE "\\" "\\\\" text "${text}")
  string(REPLACE "\"" "\\\"" text "${text}")
  string(REPLACE "?" "\\?" text "${text}")
  string(REPLACE "\t" "\\t" text "${text}")
  string(REPLACE "\r" "\\r" text "${text}")
  # One string literal per line of the file.
  string(REPLACE "\n" "\\n\"\n    \"" text "${text}")
  file(RELATIVE_PATH shown "${PW_EMBED_ROOT}" "${PW_EMBED_IN}")
  set(out "/* Generated from ${shown} by cmake/pw_embed.cmake; do not edit. */\n")
  string(APPEND out "extern const char ${PW_EMBED_SYMBOL}[];\n")
  string(APPEND out "const char ${PW_EMBED_SYMBOL}[] =\n    \"${text}\";\n")
  file(WRITE "${PW_EMBED_OUT}" "${out}")
  return()
endif()

set(PW_EMBED_SCRIPT "${CMAKE_CURRENT_LIST_FILE}")

function(pw_embed_text target file symbol)
  get_filename_component(in "${file}" ABSOLUTE BASE_DIR "${CMAKE_CURRENT_SOURCE_DIR}")
  set(out "${CMAKE_CURRENT_BINARY_DIR}/pw_embed/${symbol}.c")
  add_custom_command(
    OUTPUT "${out}"
    COMMAND "${CMAKE_COMMAND}" -DPW_EMBED_IN=${in} -DPW_EMBED_OUT=${out} -DPW_EMBED_SYMBOL=${symbol}
            -DPW_EMBED_ROOT=${CMAKE_SOURCE_DIR} -P "${PW_EMBED_SCRIPT}"
    DEPENDS "${in}" "${PW_EMBED_SCRIPT}"
    COMMENT "Embedding ${file} as ${symbol}"
    VERBATIM)
  target_sources(${target} PRIVATE "${out}")
endfunction()
