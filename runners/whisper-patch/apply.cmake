# memqual's patch step for whisper.cpp 1.8.3, run by CMake before each
# project() of the whisper.cpp build that whisper-rs-sys configures (cargo
# passes it as CMAKE_PROJECT_INCLUDE_BEFORE, see runners/patched/.cargo/config.toml).
# It patches whisper-rs-sys's own copy of the sources in its OUT_DIR, never the
# registry, and records the patch set's digest in the sources it built, so the
# worker can refuse a library patched with another set.
set(MEMQUAL_PATCHES
    "${CMAKE_CURRENT_LIST_DIR}/0001-external-encoder-only.patch"
    "${CMAKE_CURRENT_LIST_DIR}/0002-bounded-state.patch"
    "${CMAKE_CURRENT_LIST_DIR}/0003-coreml-fail-closed.patch"
    "${CMAKE_CURRENT_LIST_DIR}/0004-encoder-only-process.patch"
    "${CMAKE_CURRENT_LIST_DIR}/0005-lean-encoder-pair.patch"
    "${CMAKE_CURRENT_LIST_DIR}/0006-coreml-placement.patch")
# Copied into src/ as is: the encoder-output checks and the Core ML placement
# summary, portable headers that runners/encoder-output-check compiles and
# tests on any host.
set(MEMQUAL_SOURCES
    "${CMAKE_CURRENT_LIST_DIR}/whisper-memqual-output.h"
    "${CMAKE_CURRENT_LIST_DIR}/whisper-memqual-placement.h")

# whisper-rs-sys turns Core ML's fallback to the native encoder on; the patch
# set never falls back (and src/whisper.cpp refuses to compile if it is on).
set(WHISPER_COREML_ALLOW_FALLBACK OFF CACHE BOOL "memqual: Core ML fails closed" FORCE)

# The digest: SHA-256 over "<sha256 of each file>  <file name>\n", patches
# then copied sources, in order (runners/build.rs computes the same).
set(memqual_manifest "")
foreach(patch IN LISTS MEMQUAL_PATCHES MEMQUAL_SOURCES)
    file(SHA256 "${patch}" patch_sha)
    get_filename_component(patch_name "${patch}" NAME)
    string(APPEND memqual_manifest "${patch_sha}  ${patch_name}\n")
endforeach()
string(SHA256 MEMQUAL_PATCH_DIGEST "${memqual_manifest}")

set(memqual_marker "${CMAKE_SOURCE_DIR}/.memqual-patch-digest")
if(EXISTS "${memqual_marker}")
    file(READ "${memqual_marker}" applied)
    if(NOT applied STREQUAL MEMQUAL_PATCH_DIGEST)
        message(FATAL_ERROR "memqual: ${CMAKE_SOURCE_DIR} carries patch set ${applied}, not ${MEMQUAL_PATCH_DIGEST}: "
            "run `cargo clean -p whisper-rs-sys` in runners/patched and build again")
    endif()
    return()
endif()

if(NOT EXISTS "${CMAKE_SOURCE_DIR}/src/whisper.cpp")
    message(FATAL_ERROR "memqual: ${CMAKE_SOURCE_DIR} is not whisper.cpp's source tree")
endif()
file(STRINGS "${CMAKE_SOURCE_DIR}/CMakeLists.txt" version_line REGEX "^project\\(\"whisper.cpp\" VERSION 1\\.8\\.3\\)")
if(NOT version_line)
    message(FATAL_ERROR "memqual: the patch set is for whisper.cpp 1.8.3; ${CMAKE_SOURCE_DIR} is another version")
endif()

# git applies a patch outside a repository too; `patch` is the fallback.
find_program(MEMQUAL_GIT git)
find_program(MEMQUAL_PATCH patch)
# Outside any repository: the sources sit in cargo's target directory, often inside a checkout.
get_filename_component(memqual_ceiling "${CMAKE_SOURCE_DIR}" DIRECTORY)
foreach(patch IN LISTS MEMQUAL_PATCHES)
    if(MEMQUAL_GIT)
        set(apply_command "${CMAKE_COMMAND}" -E env "GIT_CEILING_DIRECTORIES=${memqual_ceiling}"
            "${MEMQUAL_GIT}" apply --whitespace=nowarn "${patch}")
    elseif(MEMQUAL_PATCH)
        set(apply_command "${MEMQUAL_PATCH}" -p1 --forward --batch -i "${patch}")
    else()
        message(FATAL_ERROR "memqual: git or patch is needed to apply ${patch}")
    endif()
    execute_process(
        COMMAND ${apply_command}
        WORKING_DIRECTORY "${CMAKE_SOURCE_DIR}"
        RESULT_VARIABLE rc
        OUTPUT_VARIABLE out
        ERROR_VARIABLE err)
    if(NOT rc EQUAL 0)
        message(FATAL_ERROR "memqual: ${patch} does not apply to ${CMAKE_SOURCE_DIR}: ${out}${err}")
    endif()
endforeach()
foreach(source IN LISTS MEMQUAL_SOURCES)
    file(COPY "${source}" DESTINATION "${CMAKE_SOURCE_DIR}/src")
endforeach()
file(APPEND "${CMAKE_SOURCE_DIR}/src/whisper.cpp"
    "\n// memqual: written by runners/whisper-patch/apply.cmake\n"
    "const char * whisper_memqual_patch_digest(void) {\n    return \"${MEMQUAL_PATCH_DIGEST}\";\n}\n")
file(WRITE "${memqual_marker}" "${MEMQUAL_PATCH_DIGEST}")
message(STATUS "memqual: whisper.cpp patched with set ${MEMQUAL_PATCH_DIGEST}")
