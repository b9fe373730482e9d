//! Compresses the OpenAPI document (docs/openapi.json, about 1 MB of indented JSON) into the build's output
//! directory: the binary carries 7% of its bytes (src/http/ops.rs serves them as they are to a client that accepts
//! gzip, and inflates them once for one that does not). docs/openapi.json stays the readable file people edit.

use std::io::Write;
use std::path::PathBuf;

fn main() {
    println!("cargo::rerun-if-changed=docs/openapi.json");
    let text = std::fs::read("docs/openapi.json").expect("docs/openapi.json");
    let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::best());
    gz.write_all(&text).expect("compress docs/openapi.json");
    let out = PathBuf::from(std::env::var_os("OUT_DIR").expect("OUT_DIR"));
    std::fs::write(out.join("openapi.json.gz"), gz.finish().expect("compress docs/openapi.json"))
        .expect("write openapi.json.gz");
}
