//! The console's files and the pages' scripts and style sheet, carried gzip-compressed in the binary (build.rs
//! writes them; the release binary's size, README) and inflated once, at their first use, for the life of the
//! process: what is served is byte for byte the file in the repository.

use std::io::Read;

/// `gz`, inflated into memory the process keeps (each file is inflated once, by a `LazyLock`): exactly the file's
/// bytes, not the capacity the inflating grew to.
pub fn inflate(gz: &'static [u8]) -> &'static [u8] {
    let mut bytes = Vec::with_capacity(gz.len() * 4);
    flate2::read::GzDecoder::new(gz).read_to_end(&mut bytes).expect("build.rs wrote the file as gzip");
    Box::leak(bytes.into_boxed_slice())
}

/// The bytes of file `$name` of the repository's folder `$dir` (`console` or `pages`), as build.rs compressed it.
/// Exported at the crate's root (`crate::embedded_file!`), the one place a macro is named from without an import.
#[macro_export]
macro_rules! embedded_file {
    ($dir:literal, $name:literal) => {
        $crate::http::embedded::inflate(include_bytes!(concat!(env!("OUT_DIR"), "/embedded/", $dir, "/", $name, ".gz")))
    };
}

#[cfg(test)]
mod tests {
    /// What is served is the repository's file, byte for byte, for each folder build.rs compresses.
    #[test]
    fn an_embedded_file_inflates_to_the_repositorys_file() {
        assert_eq!(crate::embedded_file!("console", "app.js"), include_bytes!("../../console/app.js"));
        assert_eq!(crate::embedded_file!("console", "index.html"), include_bytes!("../../console/index.html"));
        assert_eq!(crate::embedded_file!("pages", "pages.css"), include_bytes!("../../pages/pages.css"));
    }
}
