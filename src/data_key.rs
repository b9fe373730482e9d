//! The data directory's key: seals the secrets the server must read back later (a TOTP secret, an OIDC client
//! secret), so that a copy of the store alone (a stolen backup, a database dump) does not hold them in the clear.
//!
//! The key is 32 random bytes in a file (`data.key` in the data directory, or `data_key_file` in the
//! configuration), created readable by its owner only at first start and never logged. Losing it makes every
//! sealed secret unreadable (every authenticator app has to be enrolled again); several nodes on one PostgreSQL
//! database must all read the same key file.
//!
//! A sealed value is `version (1) ‖ nonce (24) ‖ ciphertext ‖ tag (16)`: XChaCha20-Poly1305 with a random nonce
//! (192 bits, so random nonces never collide in practice) and the caller's `context` as associated data, so a
//! value sealed for one purpose or one record cannot be moved to another and still open.

use std::io::Write;
use std::path::{Path, PathBuf};

use chacha20poly1305::aead::{Aead, KeyInit, Payload};
use chacha20poly1305::{XChaCha20Poly1305, XNonce};

/// The key file's name in the data directory when the configuration names no other.
pub const FILE_NAME: &str = "data.key";

const KEY_LEN: usize = 32;
const NONCE_LEN: usize = 24;
const TAG_LEN: usize = 16;
/// The first byte of every sealed value: a later format (another cipher, a rotated key) gets another number.
const VERSION: u8 = 1;

/// The key. Cloning copies 32 bytes; `Debug` never shows them.
#[derive(Clone)]
pub struct DataKey {
    cipher: XChaCha20Poly1305,
    /// A second key derived from the first, for keyed hashes (backup codes): never the cipher's own key.
    mac: [u8; 32],
}

impl std::fmt::Debug for DataKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("DataKey(<redacted>)")
    }
}

/// Why a sealed value does not open. One message for every case: which check failed tells an attacker nothing
/// they could use, and the caller only needs to know the value is unusable.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum SealError {
    /// Too short, or a format version this build does not know.
    #[error("the sealed value is malformed")]
    Malformed,
    /// Another key, another context, or altered bytes.
    #[error("the sealed value does not open with this key and context")]
    Rejected,
}

impl DataKey {
    /// The key of `data_dir` (`data_dir/data.key`), created at first use.
    pub fn load_or_create(data_dir: &Path) -> std::io::Result<DataKey> {
        Self::load_or_create_file(&data_dir.join(FILE_NAME))
    }

    /// The key in `path`, created (32 random bytes, mode 0600, fsynced with its directory) when the file does not
    /// exist. A file of another length, or one others may read, is refused: a truncated copy would seal with a
    /// different key, and a world-readable key protects nothing.
    pub fn load_or_create_file(path: &Path) -> std::io::Result<DataKey> {
        match std::fs::read(path) {
            Ok(bytes) => {
                check_private(path)?;
                Self::from_file_bytes(path, &bytes)
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Self::create(path),
            Err(e) => Err(with_path(path, e)),
        }
    }

    /// The key in `path`, which must exist (restore and checks: never create a key there).
    pub fn load_file(path: &Path) -> std::io::Result<DataKey> {
        let bytes = std::fs::read(path).map_err(|e| with_path(path, e))?;
        Self::from_file_bytes(path, &bytes)
    }

    fn from_file_bytes(path: &Path, bytes: &[u8]) -> std::io::Result<DataKey> {
        let key: [u8; KEY_LEN] = bytes.try_into().map_err(|_| {
            std::io::Error::new(
                std::io::ErrorKind::InvalidData,
                format!("{}: a data key is {KEY_LEN} bytes, this file has {}", path.display(), bytes.len()),
            )
        })?;
        Ok(Self::from_bytes(&key))
    }

    /// A key of this process alone, never written (an import's dry run checks with one).
    pub fn ephemeral() -> DataKey {
        let mut key = [0u8; KEY_LEN];
        getrandom::fill(&mut key).expect("the operating system's random source failed");
        Self::from_bytes(&key)
    }

    fn from_bytes(key: &[u8; KEY_LEN]) -> DataKey {
        use hmac::Mac;
        let mut derive = <hmac::Hmac<sha2::Sha256> as Mac>::new_from_slice(key).expect("HMAC takes any key length");
        derive.update(b"service-auth data key: keyed hashes v1");
        DataKey { cipher: XChaCha20Poly1305::new(key.into()), mac: derive.finalize().into_bytes().into() }
    }

    /// The key for keyed hashes of values the server must recognise but never read back (backup codes): derived
    /// from the data key, so a copy of the store alone cannot be searched for them.
    pub fn mac_key(&self) -> [u8; 32] {
        self.mac
    }

    fn create(path: &Path) -> std::io::Result<DataKey> {
        use std::os::unix::fs::OpenOptionsExt;
        let mut key = [0u8; KEY_LEN];
        getrandom::fill(&mut key).map_err(|e| std::io::Error::other(e.to_string()))?;
        if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
            std::fs::create_dir_all(dir).map_err(|e| with_path(dir, e))?;
        }
        // create_new: two processes starting at once cannot both write a key; the loser reads the winner's.
        let mut file = match std::fs::OpenOptions::new().write(true).create_new(true).mode(0o600).open(path) {
            Ok(file) => file,
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => return Self::load_file(path),
            Err(e) => return Err(with_path(path, e)),
        };
        file.write_all(&key).and_then(|()| file.sync_all()).map_err(|e| with_path(path, e))?;
        if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
            std::fs::File::open(dir).and_then(|d| d.sync_all()).map_err(|e| with_path(dir, e))?;
        }
        tracing::info!(path = %path.display(), "created the data key (keep it with the backups: see docs/guides/operations.md)");
        Ok(Self::from_bytes(&key))
    }

    /// Encrypts and authenticates `plaintext`, bound to `context` (which is not stored: the same context must be
    /// given to [`DataKey::open`]).
    pub fn seal(&self, plaintext: &[u8], context: &[u8]) -> Vec<u8> {
        let mut nonce = [0u8; NONCE_LEN];
        // The OS random source failing is not something to seal around.
        getrandom::fill(&mut nonce).expect("the operating system's random source failed");
        let ciphertext = self
            .cipher
            .encrypt(XNonce::from_slice(&nonce), Payload { msg: plaintext, aad: context })
            .expect("XChaCha20-Poly1305 encrypts any length a request can carry");
        let mut sealed = Vec::with_capacity(1 + NONCE_LEN + ciphertext.len());
        sealed.push(VERSION);
        sealed.extend_from_slice(&nonce);
        sealed.extend_from_slice(&ciphertext);
        sealed
    }

    /// The plaintext of a value [`DataKey::seal`] made with this key and `context`.
    pub fn open(&self, sealed: &[u8], context: &[u8]) -> Result<Vec<u8>, SealError> {
        let (&version, rest) = sealed.split_first().ok_or(SealError::Malformed)?;
        if version != VERSION || rest.len() < NONCE_LEN + TAG_LEN {
            return Err(SealError::Malformed);
        }
        let (nonce, ciphertext) = rest.split_at(NONCE_LEN);
        self.cipher
            .decrypt(XNonce::from_slice(nonce), Payload { msg: ciphertext, aad: context })
            .map_err(|_| SealError::Rejected)
    }
}

/// The key file a configuration uses: `data_key_file`, else `data.key` in the data directory.
pub fn path_for(data_dir: &Path, configured: Option<&Path>) -> PathBuf {
    configured.map_or_else(|| data_dir.join(FILE_NAME), Path::to_path_buf)
}

/// Copies the key file `from` to `to` (mode 0600 from its first byte, fsynced): a backup's key beside it, or a
/// backup's key put back. `Ok(false)`: there is no key at `from` (a data directory from before keys existed).
pub fn copy_file(from: &Path, to: &Path) -> std::io::Result<bool> {
    use std::os::unix::fs::OpenOptionsExt;
    let bytes = match std::fs::read(from) {
        Ok(bytes) => bytes,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(false),
        Err(e) => return Err(with_path(from, e)),
    };
    DataKey::from_file_bytes(from, &bytes)?;
    let staged = to.with_extension("key-partial");
    let mut file = std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(0o600)
        .open(&staged)
        .map_err(|e| with_path(&staged, e))?;
    file.write_all(&bytes).and_then(|()| file.sync_all()).map_err(|e| with_path(&staged, e))?;
    std::fs::rename(&staged, to).map_err(|e| with_path(to, e))?;
    if let Some(dir) = to.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::File::open(dir).and_then(|d| d.sync_all()).map_err(|e| with_path(dir, e))?;
    }
    Ok(true)
}

/// Where a backup's key goes: beside the backup, its name with `.key` added (`auth.redb` → `auth.redb.key`).
pub fn beside(backup: &Path) -> PathBuf {
    let mut name = backup.as_os_str().to_owned();
    name.push(".key");
    PathBuf::from(name)
}

/// Refuses a key file that its group or others may read or write.
fn check_private(path: &Path) -> std::io::Result<()> {
    use std::os::unix::fs::PermissionsExt;
    let mode = std::fs::metadata(path).map_err(|e| with_path(path, e))?.permissions().mode();
    if mode & 0o077 != 0 {
        return Err(std::io::Error::new(
            std::io::ErrorKind::PermissionDenied,
            format!(
                "{}: the data key must be readable by its owner only (chmod 600), not {:o}",
                path.display(),
                mode & 0o777
            ),
        ));
    }
    Ok(())
}

fn with_path(path: &Path, e: std::io::Error) -> std::io::Error {
    std::io::Error::new(e.kind(), format!("{}: {e}", path.display()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    #[test]
    fn created_once_private_and_read_back() {
        let dir = tempfile::tempdir().unwrap();
        let data = dir.path().join("data");
        let key = DataKey::load_or_create(&data).unwrap();
        let path = data.join(FILE_NAME);
        assert_eq!(std::fs::metadata(&path).unwrap().permissions().mode() & 0o777, 0o600);
        assert_eq!(std::fs::read(&path).unwrap().len(), 32);
        let sealed = key.seal(b"JBSWY3DPEHPK3PXP", b"totp:user1");
        let again = DataKey::load_or_create(&data).unwrap();
        assert_eq!(again.open(&sealed, b"totp:user1").unwrap(), b"JBSWY3DPEHPK3PXP");
        assert_eq!(std::fs::read(&path).unwrap().len(), 32, "the second start must not write a new key");
    }

    #[test]
    fn sealed_values_are_versioned_random_and_bound_to_their_context() {
        let dir = tempfile::tempdir().unwrap();
        let key = DataKey::load_or_create(dir.path()).unwrap();
        let a = key.seal(b"secret", b"ctx");
        let b = key.seal(b"secret", b"ctx");
        assert_ne!(a, b, "a fresh nonce each time");
        assert_eq!(a[0], VERSION);
        assert_eq!(a.len(), 1 + NONCE_LEN + 6 + TAG_LEN);
        assert!(!a.windows(6).any(|w| w == b"secret"), "the plaintext is not in the sealed value");
        assert_eq!(key.open(&a, b"other"), Err(SealError::Rejected));
        let mut flipped = a.clone();
        *flipped.last_mut().unwrap() ^= 1;
        assert_eq!(key.open(&flipped, b"ctx"), Err(SealError::Rejected));
        let mut future = a.clone();
        future[0] = 2;
        assert_eq!(key.open(&future, b"ctx"), Err(SealError::Malformed));
        assert_eq!(key.open(&a[..20], b"ctx"), Err(SealError::Malformed));
        assert_eq!(key.open(&[], b"ctx"), Err(SealError::Malformed));
        assert_eq!(key.open(&key.seal(b"", b"ctx"), b"ctx").unwrap(), b"");
    }

    #[test]
    fn another_key_does_not_open() {
        let dir = tempfile::tempdir().unwrap();
        let one = DataKey::load_or_create(&dir.path().join("one")).unwrap();
        let two = DataKey::load_or_create(&dir.path().join("two")).unwrap();
        assert_eq!(two.open(&one.seal(b"x", b"c"), b"c"), Err(SealError::Rejected));
    }

    #[test]
    fn debug_does_not_print_the_key() {
        let dir = tempfile::tempdir().unwrap();
        let key = DataKey::load_or_create(dir.path()).unwrap();
        let bytes = std::fs::read(dir.path().join(FILE_NAME)).unwrap();
        let shown = format!("{key:?}");
        assert_eq!(shown, "DataKey(<redacted>)");
        assert!(!shown.contains(&hex::encode(&bytes)));
    }

    #[test]
    fn a_short_or_public_key_file_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("short.key");
        std::fs::write(&path, [0u8; 16]).unwrap();
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600)).unwrap();
        let e = DataKey::load_or_create_file(&path).unwrap_err().to_string();
        assert!(e.contains("32 bytes") && e.contains("16"), "{e}");
        let public = dir.path().join("public.key");
        std::fs::write(&public, [0u8; 32]).unwrap();
        std::fs::set_permissions(&public, std::fs::Permissions::from_mode(0o644)).unwrap();
        let e = DataKey::load_or_create_file(&public).unwrap_err().to_string();
        assert!(e.contains("chmod 600"), "{e}");
    }

    #[test]
    fn a_copy_is_private_and_the_same_key() {
        let dir = tempfile::tempdir().unwrap();
        let key = DataKey::load_or_create(dir.path()).unwrap();
        let copy = beside(&dir.path().join("b.redb"));
        assert_eq!(copy, dir.path().join("b.redb.key"));
        assert!(copy_file(&dir.path().join(FILE_NAME), &copy).unwrap());
        assert_eq!(std::fs::metadata(&copy).unwrap().permissions().mode() & 0o777, 0o600);
        assert_eq!(DataKey::load_file(&copy).unwrap().open(&key.seal(b"s", b"c"), b"c").unwrap(), b"s");
        assert!(!copy_file(&dir.path().join("none.key"), &dir.path().join("x.key")).unwrap());
    }

    #[test]
    fn the_configured_file_wins() {
        let data = Path::new("/srv/data");
        assert_eq!(path_for(data, None), data.join("data.key"));
        assert_eq!(path_for(data, Some(Path::new("/etc/k"))), PathBuf::from("/etc/k"));
    }
}
