//! Compiles the patch set's output-check header twice, as C and as C++ (the
//! patched whisper.cpp includes it from C++ and Objective-C++), with warnings
//! as errors, behind a few exported wrappers the tests call.

fn main() {
    let header = "../whisper-patch/whisper-memqual-output.h";
    println!("cargo:rerun-if-changed={header}");
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
