//! Compiles the patch set's portable headers (the output checks and the
//! Core ML placement summary) twice, as C and as C++ (the
//! patched whisper.cpp includes it from C++ and Objective-C++), with warnings
//! as errors, behind a few exported wrappers the tests call.

fn main() {
    for header in [
        "../whisper-patch/whisper-memqual-output.h",
        "../whisper-patch/whisper-memqual-placement.h",
    ] {
        println!("cargo:rerun-if-changed={header}");
    }
    println!("cargo:rerun-if-changed=src/shim.c");
    println!("cargo:rerun-if-changed=src/shim_cpp.cpp");
    cc::Build::new()
        .file("src/shim.c")
        .std("c11")
        .warnings(true)
        .extra_warnings(true)
        .warnings_into_errors(true)
        .compile("memqual_output_check_c");
    cc::Build::new()
        .cpp(true)
        .file("src/shim_cpp.cpp")
        .std("c++17")
        .warnings(true)
        .extra_warnings(true)
        .warnings_into_errors(true)
        .compile("memqual_output_check_cpp");
}
