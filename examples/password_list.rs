//! Builds `src/domain/breached_passwords.fst`, the list of breached and common passwords shipped in the binary, from
//! a text list with one password a line (`docs/password-list.md` says which list and how to get it):
//!
//! `cargo run --release --example password_list -- passwords.txt src/domain/breached_passwords.fst`
//!
//! Each line is normalised as the server compares passwords (NFKC, lower-case); lines shorter than 8 characters
//! (which no password can be) or longer than 128 are left out; the rest are sorted and deduplicated.

use std::io::{BufRead, BufReader, BufWriter};

use service_auth::domain::list_key;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut args = std::env::args().skip(1);
    let (Some(input), Some(output)) = (args.next(), args.next()) else {
        return Err("usage: password_list <passwords.txt> <out.fst>".into());
    };
    let mut entries = Vec::new();
    let mut lines = 0usize;
    for line in BufReader::new(std::fs::File::open(&input)?).split(b'\n') {
        let line = line?;
        lines += 1;
        // A few lines of such lists are not UTF-8: they cannot be a password typed into a JSON body either.
        let Ok(text) = std::str::from_utf8(&line) else { continue };
        let key = list_key(text.trim_end_matches('\r'));
        if (8..=128).contains(&key.chars().count()) {
            entries.push(key);
        }
    }
    entries.sort_unstable();
    entries.dedup();
    let mut builder = fst::SetBuilder::new(BufWriter::new(std::fs::File::create(&output)?))?;
    for entry in &entries {
        builder.insert(entry)?;
    }
    builder.finish()?;
    let size = std::fs::metadata(&output)?.len();
    println!("{lines} lines read, {} entries written, {size} bytes", entries.len());
    Ok(())
}
