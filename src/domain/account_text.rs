//! An account's name, e-mail address and password hash in one allocation behind a thin pointer.
//!
//! Ten million accounts are kept in memory, each a [`User`](super::User) in an `Arc`. A `Box<[u8]>` is a pointer
//! and a length, 16 bytes; this is the pointer alone (8), the allocation saying its own length: the 8 bytes take
//! an `Arc`'d account from glibc's 112-byte chunk to its 96-byte one. Crates that give a thin boxed slice keep a
//! `usize` length (and, for `thin-vec`, a capacity) in the allocation, which is more than the lengths here take:
//! so this is the one type of the accounts that holds its bytes by hand.

use std::ptr::NonNull;

use super::{PasswordHash, StoredHash};

/// `[e-mail's length][name's length][hash's length][e-mail][name][the hash's compact bytes]`, each length a
/// LEB128 varint (seven bits a byte, the last byte under 0x80): one byte for a length under 128 (most addresses,
/// names and argon2 hashes), and no length too long to write. Made only by [`new`](Self::new), never changed.
pub(super) struct Text(NonNull<u8>);

// SAFETY: a `Text` owns its allocation alone (as a `Box<[u8]>` does) and nothing writes to it after `new`: it can
// move to another thread and be read from several at once.
unsafe impl Send for Text {}
// SAFETY: as `Send`: shared, it is only read.
unsafe impl Sync for Text {}

fn varint_len(mut n: usize) -> usize {
    let mut len = 1;
    while n >= 0x80 {
        n >>= 7;
        len += 1;
    }
    len
}

fn put_varint(bytes: &mut Vec<u8>, mut n: usize) {
    while n >= 0x80 {
        bytes.push(0x80 | (n & 0x7f) as u8);
        n >>= 7;
    }
    bytes.push(n as u8);
}

impl Text {
    pub(super) fn new(name: &str, email: &str, hash: &PasswordHash) -> Self {
        let hash = hash.bytes();
        let lengths = [email.len(), name.len(), hash.len()];
        let size = lengths.iter().map(|&n| varint_len(n) + n).sum();
        let mut bytes = Vec::with_capacity(size);
        lengths.into_iter().for_each(|n| put_varint(&mut bytes, n));
        bytes.extend_from_slice(email.as_bytes());
        bytes.extend_from_slice(name.as_bytes());
        bytes.extend_from_slice(hash);
        Self::from_box(bytes.into_boxed_slice())
    }

    /// Keeps `bytes` (a header and its parts, as `new` writes them) behind the thin pointer.
    fn from_box(bytes: Box<[u8]>) -> Self {
        Self(NonNull::from(Box::leak(bytes)).cast())
    }

    /// The three lengths (e-mail, name, hash), and the header's own.
    fn header(&self) -> ([usize; 3], usize) {
        let (mut lengths, mut at) = ([0; 3], 0);
        for length in &mut lengths {
            let mut shift = 0;
            loop {
                // SAFETY: `new` wrote three varints at the start of the allocation, each ending with a byte under
                // 0x80: this reads no further than the last of them, inside the allocation, which lives as long as
                // `self` and is never written after `new`.
                let byte = unsafe { self.0.as_ptr().add(at).read() };
                at += 1;
                *length |= usize::from(byte & 0x7f) << shift;
                if byte < 0x80 {
                    break;
                }
                shift += 7;
            }
        }
        (lengths, at)
    }

    /// The whole allocation, header and parts, and the header's lengths.
    fn bytes(&self) -> (&[u8], [usize; 3], usize) {
        let (lengths, header) = self.header();
        let size = header + lengths.iter().sum::<usize>();
        // SAFETY: the allocation is the `Box<[u8]>` of `size` bytes that `from_box` leaked (its header says so),
        // initialised, never written again, and freed only when `self` drops: the borrow cannot outlive it.
        let all = unsafe { std::slice::from_raw_parts(self.0.as_ptr(), size) };
        (all, lengths, header)
    }

    /// The e-mail address's bytes (ASCII): what the e-mail order compares.
    pub(super) fn email_bytes(&self) -> &[u8] {
        let (all, [email, ..], header) = self.bytes();
        &all[header..header + email]
    }

    pub(super) fn email(&self) -> &str {
        // Written from a `&str`: always UTF-8.
        std::str::from_utf8(self.email_bytes()).unwrap_or_default()
    }

    pub(super) fn name(&self) -> &str {
        let (all, [email, name, _], header) = self.bytes();
        std::str::from_utf8(&all[header + email..header + email + name]).unwrap_or_default()
    }

    pub(super) fn hash(&self) -> StoredHash<'_> {
        let (all, [email, name, _], header) = self.bytes();
        StoredHash::from_bytes(&all[header + email + name..])
    }
}

impl Drop for Text {
    fn drop(&mut self) {
        let size = self.bytes().0.len();
        let all = std::ptr::slice_from_raw_parts_mut(self.0.as_ptr(), size);
        // SAFETY: `all` is the `Box<[u8]>` that `from_box` leaked, whole (its pointer and length), and this is its
        // only owner: nothing reads it after this.
        drop(unsafe { Box::from_raw(all) });
    }
}

impl Clone for Text {
    fn clone(&self) -> Self {
        Self::from_box(self.bytes().0.into())
    }
}

impl PartialEq for Text {
    fn eq(&self, other: &Self) -> bool {
        self.bytes().0 == other.bytes().0
    }
}

impl Eq for Text {}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::alloc_count::{allocations_in, bytes_in};

    const ARGON2: &str =
        "$argon2id$v=19$m=19456,t=2,p=1$c2FsdHNhbHRzYWx0c2FsdA$aGFzaGhhc2hoYXNoaGFzaGhhc2hoYXNoaGFzaGhhc2g";

    /// Every part comes back as it went in, whatever its length (empty, past one varint byte, past two) or
    /// characters, and a copy is equal and independent.
    #[test]
    fn every_part_comes_back_from_a_thin_pointer() {
        assert_eq!(size_of::<Text>(), 8);
        assert_eq!(size_of::<Option<Text>>(), 8);
        let cases = [
            ("Ada".to_owned(), "ada@example.com".to_owned(), ARGON2.to_owned()),
            (String::new(), String::new(), String::new()),
            ("Ada 👩\u{200D}💻 Lovelace".to_owned(), "a@b.co".to_owned(), "not a phc string".to_owned()),
            ("é".repeat(400), "z".repeat(254), ARGON2.to_owned()),
            ("x".to_owned(), "y@z.example".to_owned(), "h".repeat(70_000)),
        ];
        for (name, email, hash) in &cases {
            let hash = PasswordHash::new(hash);
            let text = Text::new(name, email, &hash);
            let copy = text.clone();
            drop(text);
            assert_eq!(copy.name(), name);
            assert_eq!(copy.email(), email);
            assert_eq!(copy.email_bytes(), email.as_bytes());
            assert_eq!(copy.hash().owned(), hash);
            assert!(copy == copy.clone());
        }
        let a = Text::new("Ada", "ada@example.com", &PasswordHash::new(ARGON2));
        // The same bytes split differently are not the same text.
        assert!(a != Text::new("Ad", "aada@example.com", &PasswordHash::new(ARGON2)));
        assert!(a != Text::new("Ada", "ada@example.com", &PasswordHash::new("")));
    }

    /// One allocation of the header and the parts, nothing more, and all of it freed, by the original and by a
    /// copy alike.
    #[test]
    fn a_text_is_one_allocation_freed_whole() {
        let hash = PasswordHash::new(ARGON2);
        let ((text, allocations), bytes) =
            bytes_in(|| allocations_in(|| Text::new("Seed user 1", "user1@seed.example", &hash)));
        assert_eq!(allocations, 1);
        assert_eq!(bytes, 3 + 11 + 18 + 51, "three one-byte lengths, the parts, the compact hash");
        let (copy, copied) = bytes_in(|| text.clone());
        assert_eq!(copied, bytes);
        assert_eq!(bytes_in(|| drop(text)).1, -bytes);
        assert_eq!(bytes_in(|| drop(copy)).1, -bytes);
        let long = "n".repeat(300);
        let (text, bytes) = bytes_in(|| Text::new(&long, "a@b.co", &hash));
        assert_eq!(bytes, 4 + 300 + 6 + 51, "a two-byte length for the name");
        assert_eq!(bytes_in(|| drop(text)).1, -bytes);
    }
}
