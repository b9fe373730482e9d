//! Two things that keep the release binary small (README, "Run the server"; BENCHMARKS.md, "The 25 MB").
//!
//! - The OpenAPI document (docs/openapi.json, about 1 MB of indented JSON) is compressed into the build's output
//!   directory: the binary carries 7% of its bytes (src/http/ops.rs serves them as they are to a client that
//!   accepts gzip, and inflates them once for one that does not). docs/openapi.json stays the file people edit.
//! - The console's files (console/) and the pages' scripts and style sheet (pages/) are compressed the same way,
//!   into `OUT_DIR/embedded/`: src/http/embedded.rs inflates each once, at its first use (160 KB of the binary
//!   less).
//! - On Linux with glibc 2.36 or newer, the binary's relative relocations are packed (`-z pack-relative-relocs`,
//!   DT_RELR): a position-independent executable needs one per pointer in its constant data (34,000 here, 24
//!   bytes each as RELA: 0.8 MB); packed, they take a few kilobytes. The loader still relocates the whole image
//!   at its random address: ASLR is unchanged. glibc older than 2.36 cannot load such a binary, so the packing
//!   is asked for only when the glibc building it (where `cargo install` runs it) has it, and never when
//!   cross-compiling.

use std::io::Write;
use std::path::PathBuf;

fn main() {
    println!("cargo::rerun-if-changed=docs/openapi.json");
    println!("cargo::rerun-if-changed=build.rs");
    let out = PathBuf::from(std::env::var_os("OUT_DIR").expect("OUT_DIR"));
    compress("docs/openapi.json", &out.join("openapi.json.gz"));
    for dir in ["console", "pages"] {
        println!("cargo::rerun-if-changed={dir}");
        std::fs::create_dir_all(out.join("embedded").join(dir)).expect("make OUT_DIR/embedded");
        for entry in std::fs::read_dir(dir).expect(dir).map(|e| e.expect(dir)) {
            let name = entry.file_name().into_string().expect("a file name in UTF-8");
            compress(&format!("{dir}/{name}"), &out.join("embedded").join(dir).join(format!("{name}.gz")));
        }
    }

    if packed_relocations_load_here() {
        println!("cargo::rustc-link-arg-bins=-Wl,-z,pack-relative-relocs");
    }
}

/// Writes file `from` (a path in the repository) gzip-compressed to `to`.
fn compress(from: &str, to: &std::path::Path) {
    let text = std::fs::read(from).expect(from);
    let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::best());
    gz.write_all(&text).expect(from);
    std::fs::write(to, gz.finish().expect(from)).expect("write to OUT_DIR");
}

/// Whether the binary is built for this machine, a Linux with glibc 2.36 or newer (the first with DT_RELR).
fn packed_relocations_load_here() -> bool {
    let var = |name: &str| std::env::var(name).unwrap_or_default();
    if var("TARGET") != var("HOST") || var("CARGO_CFG_TARGET_OS") != "linux" || var("CARGO_CFG_TARGET_ENV") != "gnu" {
        return false;
    }
    glibc_version().is_some_and(|version| version >= (2, 36))
}

#[cfg(all(target_os = "linux", target_env = "gnu"))]
fn glibc_version() -> Option<(u32, u32)> {
    // SAFETY: gnu_get_libc_version returns a pointer to a static, NUL-terminated string.
    let text = unsafe { std::ffi::CStr::from_ptr(libc::gnu_get_libc_version()) }.to_str().ok()?;
    let mut parts = text.split('.').map(|p| p.parse::<u32>().ok());
    Some((parts.next()??, parts.next()??))
}

#[cfg(not(all(target_os = "linux", target_env = "gnu")))]
fn glibc_version() -> Option<(u32, u32)> {
    None
}
