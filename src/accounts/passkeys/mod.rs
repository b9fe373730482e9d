//! Passkeys (WebAuthn) as `@better-auth/passkey` 1.7 offers them: registering one (options, then verification),
//! signing in with one alone (a discoverable credential: options, then verification), listing, renaming and
//! deleting one's own. The cryptography is kanidm's `webauthn-rs`; what is kept between a ceremony's two calls is
//! its state in the store, under the hash of a random cookie (bound to the browser, single use, five minutes).
//!
//! Stricter than the plugin, on purpose: user verification (PIN, biometrics) is required, since a passkey alone
//! opens a session and counts as a second factor; the origin is checked against the configured list, not taken
//! from the request; a credential is registered once; an administrator impersonating a user cannot add or remove
//! the user's passkeys.

mod book;

use std::time::Duration;

use base64::Engine;
use base64::engine::general_purpose::{STANDARD, URL_SAFE_NO_PAD};
use serde_json::Value;
use tracing::Instrument;
use webauthn_rs::prelude::{
    AttestationFormat, AuthenticationResult, Credential, DiscoverableAuthentication, ParsedAttestation,
    Passkey as WebauthnPasskey, PasskeyAuthentication, PasskeyRegistration, PublicKeyCredential,
    RegisterPublicKeyCredential, Uuid, Webauthn, WebauthnBuilder,
};
use webauthn_rs_proto::{RegisteredExtensions, UserVerificationPolicy};

pub use self::book::PasskeyBook;
use super::{Accounts, Client, Current, SignedIn, Unavailable};
use crate::actors::sessions::{CreateSessionError, Start};
use crate::actors::users::{AttemptRefused, Checked};
use crate::config::RelyingParty;
use crate::domain::{
    Ceremony, CeremonyKind, Name, Passkey, PasskeyId, SessionToken, Timestamp, UserId, action, cose_key,
};
use crate::store::audit;

/// How long a ceremony waits for its verification: the plugin's cookie lives this long, and so does the state.
pub const CEREMONY_LIFETIME: Duration = Duration::from_secs(300);

/// The relying party and the store of passkeys. Built once at start from `[passkeys]`.
pub struct Passkeys {
    webauthn: Webauthn,
    pub(crate) book: PasskeyBook,
    /// [`CEREMONY_LIFETIME`], unless a test set a shorter one.
    lifetime: Duration,
}

impl Passkeys {
    /// Fails when the configuration cannot make a relying party (an origin not on its id); check-config says the
    /// same first.
    pub(crate) fn new(rp: &RelyingParty, lifetime: Option<Duration>, book: PasskeyBook) -> Result<Self, String> {
        let lifetime = lifetime.unwrap_or(CEREMONY_LIFETIME);
        let (first, rest) = rp.origins.split_first().ok_or("passkeys: no origin")?;
        let mut builder = WebauthnBuilder::new(&rp.id, first)
            .map_err(|e| format!("passkeys: origin {first} is not on rp_id {:?}: {e}", rp.id))?
            .rp_name(&rp.name)
            .timeout(lifetime);
        for origin in rest {
            builder = builder.append_allowed_origin(origin);
        }
        let webauthn = builder.build().map_err(|e| format!("passkeys: {e}"))?;
        Ok(Self { webauthn, book, lifetime })
    }
}

/// Where a ceremony's token is: what the plugin keeps in its `better-auth-passkey` cookie.
pub type CeremonyToken = SessionToken;

/// How a passkey call failed; the messages are the plugin's.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum PasskeyError {
    /// No ceremony for this cookie: none begun, another verification took it, it expired, or it was of the other
    /// kind.
    #[error("Challenge not found")]
    ChallengeNotFound,
    /// The ceremony was begun for another account than the caller's.
    #[error("You are not allowed to register this passkey")]
    NotAllowed,
    #[error("Failed to verify registration")]
    RegistrationFailed,
    /// The credential is registered already (to this account or another).
    #[error("Previously registered")]
    PreviouslyRegistered,
    /// No such passkey, or not the caller's (answered alike).
    #[error("Passkey not found")]
    NotFound,
    #[error("Authentication failed")]
    AuthenticationFailed,
    #[error("You have been banned from this application. Please contact support if you believe this is an error.")]
    Banned,
    #[error("Email not verified")]
    EmailNotVerified,
    /// An organization's single sign-on policy covers the account's address (src/accounts/sso_policy.rs).
    #[error("{}", crate::accounts::SSO_REQUIRED)]
    SsoRequired,
    /// The account's failure budget is spent (wrong passwords, codes or assertions): refused until its window
    /// ends, as a password would be.
    #[error("Too many requests. Please try again later.")]
    Locked(Duration),
    #[error(transparent)]
    Unavailable(#[from] Unavailable),
}

/// Which authenticators a registration asks for (the plugin's `authenticatorAttachment`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Attachment {
    Platform,
    CrossPlatform,
}

impl Attachment {
    pub fn parse(s: &str) -> Option<Self> {
        match s {
            "platform" => Some(Self::Platform),
            "cross-platform" => Some(Self::CrossPlatform),
            _ => None,
        }
    }

    fn as_str(self) -> &'static str {
        match self {
            Self::Platform => "platform",
            Self::CrossPlatform => "cross-platform",
        }
    }
}

impl Accounts {
    /// How many passkeys each of `users` has, in their order (the console's users list, a page at a time).
    pub async fn passkey_counts(&self, users: Vec<UserId>) -> Result<Vec<usize>, Unavailable> {
        self.passkeys.book.counts(users).await
    }

    /// The caller's passkeys, oldest first.
    pub async fn own_passkeys(&self, user: UserId) -> Result<Vec<Passkey>, Unavailable> {
        let mut passkeys = self.passkeys.book.of(user).await?;
        passkeys.sort_by_key(|p| p.id);
        Ok(passkeys)
    }

    /// Registration options for the caller (`generate-register-options`): the options as JSON for the browser,
    /// and the token of the cookie that binds the ceremony to it. `user_name` is what the authenticator shows
    /// (default: the e-mail address).
    pub async fn passkey_registration_options(
        &self,
        current: &Current,
        user_name: Option<&str>,
        attachment: Option<Attachment>,
    ) -> Result<(CeremonyToken, Value), Unavailable> {
        let user = &current.user;
        let existing = self.passkeys.book.of(user.id).await?;
        let exclude = existing.iter().map(|p| p.credential_id.clone()).collect();
        let email = user.email();
        // A new random user handle for each registration, as the plugin makes: the account's id never reaches the
        // authenticator, and a sign-in finds its passkey by credential id.
        let (ccr, state) = self
            .passkeys
            .webauthn
            .start_passkey_registration(Uuid::new_v4(), user_name.unwrap_or(email), email, Some(exclude))
            .map_err(|error| unexpected("start a registration", error))?;
        let mut options = serde_json::to_value(&ccr.public_key).map_err(|_| Unavailable)?;
        // A discoverable credential where the authenticator can make one (a sign-in then needs no e-mail), as the
        // plugin asks; the library asks for none. Verification does not depend on it.
        if let Some(selection) = options.get_mut("authenticatorSelection").and_then(Value::as_object_mut) {
            selection.insert("residentKey".into(), "preferred".into());
            selection.insert("requireResidentKey".into(), false.into());
            match attachment {
                Some(a) => selection.insert("authenticatorAttachment".into(), a.as_str().into()),
                None => selection.remove("authenticatorAttachment"),
            };
        }
        let state = serde_json::to_vec(&state).map_err(|_| Unavailable)?;
        let token = self.begin_ceremony(CeremonyKind::Registration, Some(user.id), state).await?;
        Ok((token, options))
    }

    /// Verifies a registration (`verify-registration`) for the caller and stores the passkey, audited.
    pub async fn verify_passkey_registration(
        &self,
        current: &Current,
        token: Option<CeremonyToken>,
        response: &Value,
        name: Option<Name>,
        ip: &str,
    ) -> Result<Passkey, PasskeyError> {
        let ceremony = self.take_ceremony(token, CeremonyKind::Registration).await?;
        if ceremony.user != Some(current.user.id) {
            return Err(PasskeyError::NotAllowed);
        }
        let state: PasskeyRegistration =
            serde_json::from_slice(&ceremony.state).map_err(|_| PasskeyError::ChallengeNotFound)?;
        let registration: RegisterPublicKeyCredential =
            serde_json::from_value(response.clone()).map_err(|_| PasskeyError::RegistrationFailed)?;
        let verified = self.passkeys.webauthn.finish_passkey_registration(&registration, &state).map_err(|error| {
            tracing::debug!(%error, "a passkey registration did not verify");
            PasskeyError::RegistrationFailed
        })?;
        let credential = Credential::from(verified);
        let (public_key, aaguid) =
            attested_key(&registration.response.attestation_object).ok_or(PasskeyError::RegistrationFailed)?;
        if self.passkeys.book.by_credential(credential.cred_id.to_vec()).await?.is_some() {
            return Err(PasskeyError::PreviouslyRegistered);
        }
        let passkey = Passkey {
            id: PasskeyId::new(),
            user_id: current.user.id,
            name,
            credential_id: credential.cred_id.to_vec(),
            public_key,
            counter: credential.counter,
            backup_eligible: credential.backup_eligible,
            backed_up: credential.backup_state,
            transports: transports(response),
            aaguid,
            created_at: Timestamp::now(),
        };
        let logged = self.passkey_audit(action::PASSKEY_REGISTERED, current, &passkey, ip);
        self.passkeys.book.put(&passkey, Some(logged)).await?;
        Ok(passkey)
    }

    /// Sign-in options (`generate-authenticate-options`). Without a session (a sign-in with a passkey alone) the
    /// browser picks any discoverable credential for this site; with one, the caller's passkeys are listed.
    pub async fn passkey_authentication_options(
        &self,
        caller: Option<&Current>,
    ) -> Result<(CeremonyToken, Value), Unavailable> {
        let listed = match caller {
            Some(current) => self.passkeys.book.of(current.user.id).await?,
            None => Vec::new(),
        };
        let credentials: Vec<WebauthnPasskey> =
            listed.iter().filter_map(credential).map(WebauthnPasskey::from).collect();
        let webauthn = &self.passkeys.webauthn;
        let (options, state, user) = match caller.filter(|_| !credentials.is_empty()) {
            Some(current) => {
                let (rcr, state) = webauthn
                    .start_passkey_authentication(&credentials)
                    .map_err(|error| unexpected("start a sign-in", error))?;
                (rcr.public_key, serde_json::to_vec(&state), Some(current.user.id))
            }
            None => {
                let (rcr, state) = webauthn
                    .start_discoverable_authentication()
                    .map_err(|error| unexpected("start a sign-in", error))?;
                (rcr.public_key, serde_json::to_vec(&state), None)
            }
        };
        let options = serde_json::to_value(&options).map_err(|_| Unavailable)?;
        let token = self.begin_ceremony(CeremonyKind::Authentication, user, state.map_err(|_| Unavailable)?).await?;
        Ok((token, options))
    }

    /// Verifies a sign-in with a passkey (`verify-authentication`) and opens a session as `sign-in/email` does:
    /// refused for a banned account (and, when addresses must be verified, an unverified one), audited.
    pub async fn sign_in_with_passkey(
        &self,
        token: Option<CeremonyToken>,
        response: &Value,
        client: Client,
    ) -> Result<SignedIn, PasskeyError> {
        let ceremony = self.take_ceremony(token, CeremonyKind::Authentication).await?;
        let id = response.get("id").and_then(Value::as_str).and_then(|id| URL_SAFE_NO_PAD.decode(id).ok());
        let passkey = match id {
            Some(id) => self.passkeys.book.by_credential(id).await?,
            None => None,
        };
        let passkey = passkey.ok_or(PasskeyError::NotFound)?;
        let user = self.indexes.users.get(passkey.user_id).ok_or(PasskeyError::NotFound)?;
        let (me, response, ip) = (self.clone(), response.clone(), client.ip_address.clone());
        // A task of its own, as a sign-in's password check: dropped between the reservation and its end (the
        // client hung up), the reservation would count against the account until its window ends.
        let check = async move { me.checked_assertion(&user, &ceremony, passkey, &response, ip).await };
        let passkey = self.tasks.spawn(check.in_current_span()).await.map_err(|_| Unavailable)??;
        // The single sign-on policy: only now is the account known (a discoverable credential names it), so only
        // a right assertion learns of the refusal, and nothing is told of an account before. A service
        // administrator keeps this way in, as its password.
        let user = self.indexes.users.get(passkey.user_id).ok_or(PasskeyError::NotFound)?;
        if self.sso_refuses_user(&user).await? {
            return Err(PasskeyError::SsoRequired);
        }
        self.passkey_session(passkey.user_id, client).await
    }

    /// A passkey assertion checked against the account's one failure budget (the password's and the codes',
    /// [`crate::actors::attempts`]): reserved before the check, so a locked account takes no assertion either; a
    /// failure counts and is audited as the password's are, a success clears the count (a passkey is a second
    /// factor of its own).
    async fn checked_assertion(
        &self,
        user: &crate::domain::User,
        ceremony: &Ceremony,
        passkey: Passkey,
        response: &Value,
        ip: String,
    ) -> Result<Passkey, PasskeyError> {
        let users = &self.actors.users;
        users.begin_attempt(user.email_address(), Some(user.id), ip.clone()).await.map_err(|e| match e {
            AttemptRefused::Locked(wait) => PasskeyError::Locked(wait),
            AttemptRefused::Unavailable(u) => PasskeyError::Unavailable(u),
        })?;
        let verified = self.verify_assertion(ceremony, &passkey, response);
        let checked = match &verified {
            Ok(_) => Checked::Verified,
            Err(PasskeyError::AuthenticationFailed) => Checked::Wrong,
            Err(_) => Checked::NotChecked,
        };
        users.finish_code_attempt(user.email_address(), user.id, checked, ip).await?;
        let result = verified?;
        // The counter moves on (a clone with an older one is refused from now on), the backup state is refreshed.
        let moved = Passkey {
            counter: result.counter().max(passkey.counter),
            backed_up: result.backup_state(),
            ..passkey.clone()
        };
        if moved != passkey {
            self.passkeys.book.put(&moved, None).await?;
        }
        Ok(moved)
    }

    /// The assertion `response` checked against the ceremony's state and the stored `passkey`.
    fn verify_assertion(
        &self,
        ceremony: &Ceremony,
        passkey: &Passkey,
        response: &Value,
    ) -> Result<AuthenticationResult, PasskeyError> {
        let assertion: PublicKeyCredential =
            serde_json::from_value(response.clone()).map_err(|_| PasskeyError::AuthenticationFailed)?;
        let webauthn = &self.passkeys.webauthn;
        let failed = |error| {
            tracing::debug!(%error, "a passkey sign-in did not verify");
            PasskeyError::AuthenticationFailed
        };
        let result = match ceremony.user {
            // Signed in when the options were asked for: only that account's passkeys were offered.
            Some(_) => {
                let state: PasskeyAuthentication =
                    serde_json::from_slice(&ceremony.state).map_err(|_| PasskeyError::ChallengeNotFound)?;
                webauthn.finish_passkey_authentication(&assertion, &state).map_err(failed)?
            }
            None => {
                let state: DiscoverableAuthentication =
                    serde_json::from_slice(&ceremony.state).map_err(|_| PasskeyError::ChallengeNotFound)?;
                let stored = credential(passkey).ok_or(PasskeyError::AuthenticationFailed)?;
                webauthn.finish_discoverable_authentication_v2(&assertion, state, &stored).map_err(failed)?
            }
        };
        if result.cred_id().as_slice() != passkey.credential_id.as_slice() {
            return Err(PasskeyError::AuthenticationFailed);
        }
        Ok(result)
    }

    /// A new session for `user` after a passkey ceremony (a sign-in, or a registration that asks for one), as
    /// `sign-in/email` opens one: remembered, refused for a banned account (and for an unverified address when
    /// addresses must be verified), audited as a sign-in with a passkey.
    pub async fn passkey_session(&self, user: UserId, client: Client) -> Result<SignedIn, PasskeyError> {
        let user = self.indexes.users.get(user).ok_or(PasskeyError::NotFound)?;
        if self.require_verification && !user.email_verified {
            return Err(PasskeyError::EmailNotVerified);
        }
        let (token, session) =
            self.actors.sessions.create(user.id, true, client, Start::Passkey).await.map_err(|e| match e {
                CreateSessionError::Banned => PasskeyError::Banned,
                CreateSessionError::UnknownUser => PasskeyError::NotFound,
                CreateSessionError::Unavailable(u) => PasskeyError::Unavailable(u),
            })?;
        let user = self.indexes.users.get(user.id).unwrap_or(user);
        Ok(SignedIn { token, session, user })
    }

    /// Renames one of the caller's passkeys (`update-passkey`), audited.
    pub async fn rename_passkey(
        &self,
        current: &Current,
        id: PasskeyId,
        name: Name,
        ip: &str,
    ) -> Result<Passkey, PasskeyError> {
        let passkey = self.own_passkey(current.user.id, id).await?;
        let renamed = Passkey { name: Some(name), ..passkey };
        let logged = self.passkey_audit(action::PASSKEY_RENAMED, current, &renamed, ip);
        self.passkeys.book.put(&renamed, Some(logged)).await?;
        Ok(renamed)
    }

    /// Deletes one of the caller's passkeys (`delete-passkey`), audited.
    pub async fn delete_passkey(&self, current: &Current, id: PasskeyId, ip: &str) -> Result<(), PasskeyError> {
        let passkey = self.own_passkey(current.user.id, id).await?;
        let logged = self.passkey_audit(action::PASSKEY_DELETED, current, &passkey, ip);
        self.passkeys.book.delete(&passkey, logged).await?;
        Ok(())
    }

    /// Deletes the ceremonies that expired unfinished (housekeeping).
    pub(crate) async fn prune_passkey_ceremonies(&self) -> Result<usize, Unavailable> {
        self.passkeys.book.prune(Timestamp::now()).await
    }

    async fn own_passkey(&self, user: UserId, id: PasskeyId) -> Result<Passkey, PasskeyError> {
        let passkeys = self.passkeys.book.of(user).await?;
        passkeys.into_iter().find(|p| p.id == id).ok_or(PasskeyError::NotFound)
    }

    fn passkey_audit(&self, what: &str, current: &Current, passkey: &Passkey, ip: &str) -> crate::store::StoreOp {
        audit::entry(what, Some(current.actor()), Some(current.user.id.into()), ip, format!("passkey {}", passkey.id))
    }

    async fn begin_ceremony(
        &self,
        kind: CeremonyKind,
        user: Option<UserId>,
        state: Vec<u8>,
    ) -> Result<CeremonyToken, Unavailable> {
        let token = SessionToken::generate();
        let ceremony = Ceremony { kind, user, state, expires_at: Timestamp::now().plus(self.passkeys.lifetime) };
        self.passkeys.book.begin(token.hash(), &ceremony).await?;
        Ok(token)
    }

    /// The ceremony of the cookie's token, taken (no other verification can use it), if it is of `kind`.
    async fn take_ceremony(&self, token: Option<CeremonyToken>, kind: CeremonyKind) -> Result<Ceremony, PasskeyError> {
        let token = token.ok_or(PasskeyError::ChallengeNotFound)?;
        let ceremony = self.passkeys.book.take(token.hash()).await?;
        ceremony.filter(|c| c.kind == kind).ok_or(PasskeyError::ChallengeNotFound)
    }
}

/// A library failure where none is expected (it only fails on a bad configuration, refused at start).
fn unexpected(what: &str, error: impl std::fmt::Display) -> Unavailable {
    tracing::error!(%error, "could not {what} with a passkey");
    Unavailable
}

/// The credential the library verifies with, rebuilt from what the store keeps (its COSE key): `None` for a key
/// it cannot read.
fn credential(passkey: &Passkey) -> Option<Credential> {
    Some(Credential {
        cred_id: passkey.credential_id.clone(),
        cred: cose_key(&passkey.public_key)?,
        counter: passkey.counter,
        transports: None,
        user_verified: true,
        backup_eligible: passkey.backup_eligible,
        backup_state: passkey.backed_up,
        registration_policy: UserVerificationPolicy::Required,
        extensions: RegisteredExtensions::none(),
        attestation: ParsedAttestation::default(),
        attestation_format: AttestationFormat::None,
    })
}

/// The credential's COSE public key (its exact bytes) and the authenticator model (AAGUID, `None` when all zero),
/// from an attestation object's authenticator data: rpIdHash (32), flags (1), counter (4), then the attested
/// credential data: AAGUID (16), credential id length (2), credential id, COSE key (CBOR), extensions.
fn attested_key(attestation_object: &[u8]) -> Option<(Vec<u8>, Option<Uuid>)> {
    use serde_cbor_2::Value;
    let Value::Map(object) = serde_cbor_2::from_slice::<Value>(attestation_object).ok()? else { return None };
    let Some(Value::Bytes(data)) = object.get(&Value::Text("authData".into())) else { return None };
    const ATTESTED: u8 = 0x40;
    if data.len() < 55 || data[32] & ATTESTED == 0 {
        return None;
    }
    let aaguid: [u8; 16] = data[37..53].try_into().ok()?;
    let id_len = usize::from(u16::from_be_bytes([data[53], data[54]]));
    let rest = data.get(55 + id_len..)?;
    let mut reader = serde_cbor_2::Deserializer::from_slice(rest);
    serde::Deserialize::deserialize(&mut reader).map(|_: Value| ()).ok()?;
    let key = rest[..reader.byte_offset()].to_vec();
    Some((key, (aaguid != [0; 16]).then(|| Uuid::from_bytes(aaguid))))
}

/// The transports the browser reported (`response.transports`), as the plugin stores them; at most eight short
/// words, since they are only hints.
fn transports(response: &Value) -> Vec<String> {
    let listed = response.pointer("/response/transports").and_then(Value::as_array);
    listed
        .into_iter()
        .flatten()
        .filter_map(Value::as_str)
        .filter(|t| !t.is_empty() && t.len() <= 16 && t.bytes().all(|b| b.is_ascii_lowercase() || b == b'-'))
        .take(8)
        .map(str::to_owned)
        .collect()
}

/// The passkey's public key as the plugin's answers carry it: standard base64 of the COSE key.
pub fn public_key_base64(passkey: &Passkey) -> String {
    STANDARD.encode(&passkey.public_key)
}

/// The credential id as the plugin's answers carry it: unpadded base64url.
pub fn credential_id_base64url(passkey: &Passkey) -> String {
    URL_SAFE_NO_PAD.encode(&passkey.credential_id)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn transports_keep_only_short_words() {
        let response =
            serde_json::json!({"response": {"transports": ["internal", "hybrid", "BAD", "x".repeat(40), 3]}});
        assert_eq!(transports(&response), ["internal", "hybrid"]);
        assert!(transports(&serde_json::json!({})).is_empty());
    }

    #[test]
    fn an_attestation_without_credential_data_is_refused() {
        let object = serde_cbor_2::to_vec(&serde_cbor_2::Value::Map(
            [(serde_cbor_2::Value::Text("authData".into()), serde_cbor_2::Value::Bytes(vec![0; 37]))].into(),
        ))
        .unwrap();
        assert_eq!(attested_key(&object), None);
        assert_eq!(attested_key(b"not cbor"), None);
    }
}
