//! Sign-in through another identity provider, orchestrated: the flow kept in the store between the redirect and
//! the callback (single use, bound to the browser that started it, 10 minutes), the provider's answer checked
//! ([`crate::oauth`]), the account chosen or created by the users actor and the session started in the same
//! commit.

use std::collections::HashSet;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use sha2::{Digest, Sha256};
use subtle::ConstantTimeEq;

use super::{Accounts, Client, SignedIn, Unavailable};
use crate::actors::linked::LinkedAccount;
use crate::actors::sessions::{CreateSessionError, Start};
use crate::actors::users::{
    ExternalError, ExternalIdentity, ExternalOutcome, ExternalSession, ExternalSignIn, ExternalStart, UnlinkError,
};
use crate::domain::{Email, ImageUrl, Name, SessionToken, Timestamp, User, UserId};
use crate::oauth::{Identity, OAuth, OAuthError, Tokens, random_token};
use crate::store::linked::OAuthFlowRecordV1;
use crate::store::{StoreError, StoreOp, StoreWriter};

/// How long a started sign-in may take to come back.
pub const FLOW_LIFETIME: Duration = Duration::from_secs(600);

/// The configured providers, and what finishing a flow needs.
pub struct Flows {
    pub oauth: OAuth,
    /// `[oauth] store_tokens`: the provider's tokens are sealed with the data directory's key and kept.
    store_tokens: bool,
    pub(super) writer: StoreWriter,
    /// The flows (their states' hashes) a callback on this node is finishing: from before the flow is read until
    /// its take is durable, no other callback of this node gets it (a replay in parallel finds it taken). The
    /// store's own check makes a flow single use across nodes.
    taking: Mutex<HashSet<[u8; 32]>>,
}

impl Flows {
    pub fn new(config: &crate::oauth::config::OAuthConfig, writer: StoreWriter) -> Self {
        Self {
            oauth: OAuth::new(config),
            store_tokens: config.store_tokens,
            writer,
            taking: Mutex::new(HashSet::new()),
        }
    }

    /// Claims the flow of `hash` for this callback, until the claim is dropped; `None` while another callback of
    /// this node holds it.
    pub(super) fn claim(&self, hash: [u8; 32]) -> Option<Claim<'_>> {
        let fresh = self.taking.lock().unwrap_or_else(PoisonError::into_inner).insert(hash);
        fresh.then_some(Claim { flows: self, hash })
    }
}

/// A flow being finished by one callback ([`Flows::claim`]).
pub(super) struct Claim<'a> {
    flows: &'a Flows,
    hash: [u8; 32],
}

impl Drop for Claim<'_> {
    fn drop(&mut self) {
        self.flows.taking.lock().unwrap_or_else(PoisonError::into_inner).remove(&self.hash);
    }
}

/// A flow to start, validated by the handler (the URLs are trusted ones).
pub struct FlowStart {
    pub provider: String,
    pub redirect_uri: String,
    pub callback_url: String,
    pub error_url: Option<String>,
    pub new_user_url: Option<String>,
    pub link_user: Option<UserId>,
    pub scopes: Vec<String>,
    pub login_hint: Option<String>,
}

/// Where to send the browser, and the cookie that binds the flow to it.
pub struct FlowStarted {
    pub url: String,
    pub browser: String,
}

#[derive(Debug, thiserror::Error)]
pub enum StartError {
    #[error("Provider not found")]
    ProviderNotFound,
    #[error("the provider cannot be reached: {0}")]
    Provider(OAuthError),
    #[error(transparent)]
    Unavailable(#[from] Unavailable),
}

/// What the provider's redirect back carried.
pub struct Callback<'a> {
    pub provider: &'a str,
    pub state: &'a str,
    pub code: Option<&'a str>,
    pub error: Option<&'a str>,
    pub error_description: Option<&'a str>,
    pub iss: Option<&'a str>,
    /// The flow cookie the browser sent.
    pub browser: Option<&'a str>,
    /// The signed-in user the request's session cookie names, if any (a link must come from them).
    pub signed_in: Option<UserId>,
    /// This browser's trusted-device cookie, if it sent one.
    pub trusted: Option<SessionToken>,
}

/// How a callback ended well.
pub enum Finished {
    /// A session; `renewed_trust`: the trusted device it came through (an account with a second factor), renewed.
    SignedIn {
        signed_in: SignedIn,
        new_user: bool,
        callback_url: String,
        new_user_url: Option<String>,
        renewed_trust: Option<SessionToken>,
    },
    /// The account has a second factor: no session yet, the challenge to prove it with (as after a password).
    SecondFactor {
        challenge: SessionToken,
        callback_url: String,
    },
    Linked {
        callback_url: String,
    },
}

/// How a sign-in through a provider goes on once its account is known: as a password's does.
pub(super) enum Entry {
    /// A session, and with a trusted device of an account with a second factor, the device's renewed token.
    Session(SignedIn, Option<SessionToken>),
    /// The account has a second factor: the challenge to prove it with.
    SecondFactor(SessionToken),
    /// The account's second factor is a passkey, which a provider does not stand in for: it signs in with that.
    PasskeyRequired,
}

/// Who vouches for an identity given to [`Accounts::admit`], and what that allows.
pub(super) struct AdmitAs {
    /// The linked account's provider: a configured provider's id, or a single sign-on provider's `providerId`.
    pub provider: String,
    /// Its verified addresses may join an existing account with the same (proven) address.
    pub trusted: bool,
    /// An address it does not assert as verified may make a new account (not verified).
    pub sign_up_unverified: bool,
    pub sso: Option<crate::actors::users::SsoSignIn>,
}

impl AdmitAs {
    /// A configured provider (`[[oauth.providers]]`), as its configuration says.
    pub(super) fn configured(provider: &crate::oauth::Provider) -> Self {
        Self {
            provider: provider.config.id.clone(),
            trusted: provider.config.trusted_for_linking,
            sign_up_unverified: provider.config.allow_unverified_email_sign_up,
            sso: None,
        }
    }
}

/// An identity admitted by [`Accounts::admit`].
pub(super) enum Admitted {
    /// Linked to the account that asked.
    Linked,
    /// The account it signs into (`new_user`: made now), and how its sign-in went when it was decided in the
    /// account's commit (`None`: it is the caller's to go on with, [`Accounts::enter`]).
    User { user: Arc<User>, new_user: bool, entered: Option<Result<Entry, CreateSessionError>> },
}

/// Why an identity a provider vouched for was not admitted.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Refused {
    /// The provider gave no usable address.
    EmailNotFound,
    /// Nor a usable name (none, and the address's local part is not one either).
    UserInfo,
    /// Its address has an account here, and this provider may not link to it, or the account's own address was
    /// never proven (no silent takeover).
    NotLinked,
    /// Its address has no account here, and the provider does not assert it verified it: no account is made.
    UnverifiedEmail,
    /// A link asked for, of an address the provider does not assert as verified, at a provider not trusted for
    /// linking.
    LinkingNotAllowed,
    /// The identity is another account's.
    LinkedElsewhere,
    /// A link asked for with an identity of another address.
    EmailMismatch,
    /// The account that asked for a link is gone.
    UserGone,
    /// `require_verification`, and the account's address is not verified.
    EmailNotVerified,
    /// An organization's single sign-on policy covers the address: it signs in through that organization's
    /// provider only (src/accounts/sso_policy.rs).
    SsoRequired,
    Unavailable,
}

impl Refused {
    /// The callback's `?error=` code.
    fn code(self) -> &'static str {
        match self {
            Self::EmailNotFound => "email_not_found",
            Self::UserInfo => "unable_to_get_user_info",
            Self::NotLinked => "account_not_linked",
            Self::UnverifiedEmail => "email_not_verified",
            // better-auth's linkOAuthAccount answers an untrusted, unverified link so.
            Self::LinkingNotAllowed => "unable_to_link_account",
            Self::LinkedElsewhere => "account_already_linked_to_different_user",
            Self::EmailMismatch => "email_does_not_match",
            Self::UserGone => "unable_to_link_account",
            Self::EmailNotVerified => "email_not_verified",
            // The code `magic-link/verify` redirects with, and the JSON answers' code.
            Self::SsoRequired => "SSO_REQUIRED",
            Self::Unavailable => "unavailable",
        }
    }
}

/// How a callback failed: with a flow, to its error URL with `?error=code`; without one, as an answer.
#[derive(Debug)]
pub enum CallbackError {
    /// No such flow: never started, finished already (a replay), or expired and swept.
    NoFlow,
    Redirect {
        error_url: String,
        code: &'static str,
        description: Option<String>,
    },
    Unavailable,
}

impl Accounts {
    /// Starts a flow: the authorization URL, and the flow written to the store before it is given out.
    pub async fn start_flow(&self, start: FlowStart) -> Result<FlowStarted, StartError> {
        let provider = self.flows.oauth.provider(&start.provider).ok_or(StartError::ProviderNotFound)?;
        self.start_flow_at(&provider, start).await
    }

    /// [`Self::start_flow`] at `provider`, configured or not (an organization's single sign-on provider): the
    /// flow's `provider` is what its callback must name.
    pub(super) async fn start_flow_at(
        &self,
        provider: &crate::oauth::Provider,
        start: FlowStart,
    ) -> Result<FlowStarted, StartError> {
        let flows = &self.flows;
        let state = random_token();
        let browser = random_token();
        let authorization = flows
            .oauth
            .authorize(provider, &state, &start.redirect_uri, &start.scopes, start.login_hint.as_deref())
            .await
            .map_err(StartError::Provider)?;
        let record = OAuthFlowRecordV1 {
            provider: start.provider,
            pkce_verifier: authorization.pkce_verifier,
            nonce: authorization.nonce,
            browser: sha256(&browser),
            redirect_uri: start.redirect_uri,
            callback_url: start.callback_url,
            error_url: start.error_url,
            new_user_url: start.new_user_url,
            link_user: start.link_user.map(UserId::to_bytes),
            expires_at_ms: Timestamp::now().plus(FLOW_LIFETIME).as_millis(),
        };
        flows.writer.write(vec![StoreOp::PutFlow(sha256(&state), record)]).await.map_err(|_| Unavailable)?;
        Ok(FlowStarted { url: authorization.url, browser })
    }

    /// Finishes a flow of a configured provider ([`Self::exchange_flow`]) and signs the identity in (or links it).
    pub async fn finish_flow(
        &self,
        callback: Callback<'_>,
        client: Client,
        waited: &mut Duration,
    ) -> Result<Finished, CallbackError> {
        let (trusted, signed_in) = (callback.trusted.clone(), callback.signed_in);
        let lookup = |id: &str| self.flows.oauth.provider(id);
        let (flow, provider, identity, tokens) = self.exchange_flow(&callback, lookup, waited).await?;
        let fail = flow_failure(&flow);
        let link_user = flow.link_user.map(UserId::from_bytes);
        // A link is made for the session that asked, still signed in in this browser.
        if link_user.is_some() && link_user != signed_in {
            return Err(fail("unable_to_link_account", None));
        }
        let how = AdmitAs::configured(&provider);
        let admitted = self.admit(how, identity, tokens, link_user, trusted.clone(), &client).await;
        self.conclude(flow, admitted, trusted, client).await
    }

    /// The first half of a callback, whatever the provider: takes the flow (once), checks it against the browser
    /// and the provider's answer, and exchanges the code. `provider` finds the flow's provider by the name the flow
    /// was started with. The take is durable before anything else is written, and before the provider's answer is
    /// used; it is written while the provider is asked (the code exchange), so that the callback's own time holds
    /// one commit, not two before the account's: the account's records and the session are the other, together.
    /// The time spent waiting for the provider is added to `waited` (the callback's own time is the rest).
    pub(super) async fn exchange_flow(
        &self,
        callback: &Callback<'_>,
        provider: impl FnOnce(&str) -> Option<Arc<crate::oauth::Provider>>,
        waited: &mut Duration,
    ) -> Result<(OAuthFlowRecordV1, Arc<crate::oauth::Provider>, Identity, Tokens), CallbackError> {
        let hash = sha256(callback.state);
        // Held until the take is durable: a replay in parallel on this node finds the flow taken.
        let _claim = self.flows.claim(hash).ok_or(CallbackError::NoFlow)?;
        let flow = self.read_flow(&hash).await?;
        let fail = flow_failure(&flow);
        let checked = (|| {
            let same_browser = callback.browser.is_some_and(|b| bool::from(sha256(b).ct_eq(&flow.browser)));
            if !same_browser || flow.provider != callback.provider {
                return Err(fail("state_mismatch", None));
            }
            if flow.expires_at_ms < Timestamp::now().as_millis() {
                return Err(fail("state_expired", None));
            }
            if let Some(error) = callback.error {
                // The provider's own words ("access_denied"): passed on, as better-auth does.
                let code = match error {
                    "access_denied" => "access_denied",
                    "login_required" => "login_required",
                    "consent_required" => "consent_required",
                    _ => "provider_error",
                };
                return Err(fail(code, callback.error_description.map(str::to_owned)));
            }
            let provider = provider(&flow.provider).ok_or_else(|| fail("oauth_provider_not_found", None))?;
            // RFC 9207: a provider that names itself must be the one the flow went to (a mix-up attack otherwise).
            if let (Some(iss), Some(issuer)) = (callback.iss, provider.config.issuer_url())
                && iss.trim_end_matches('/') != issuer
            {
                return Err(fail("issuer_mismatch", None));
            }
            let code = callback.code.ok_or_else(|| fail("no_code", None))?;
            Ok((provider, code))
        })();
        let (provider, code) = match checked {
            Ok(checked) => checked,
            // Refused, and used up all the same (a login CSRF's flow is burnt).
            Err(refused) => {
                self.take_flow(&hash).await?;
                return Err(refused);
            }
        };
        let exchange =
            self.flows.oauth.finish(&provider, code, &flow.pkce_verifier, &flow.nonce, &flow.redirect_uri, waited);
        let (taken, exchanged) = tokio::join!(self.take_flow(&hash), exchange);
        // Not taken (another node's callback took it first, or the store failed): the provider's answer is dropped.
        taken?;
        let (identity, tokens) = exchanged.map_err(|e| {
            tracing::warn!(provider = %flow.provider, error = %e, "a sign-in through a provider failed");
            fail(e.code(), Some(e.to_string()))
        })?;
        Ok((flow, provider, identity, tokens))
    }

    /// The second half of a callback: how the admitted identity's sign-in ends (a session, a second factor's
    /// challenge, a link), or the flow's error redirect.
    pub(super) async fn conclude(
        &self,
        flow: OAuthFlowRecordV1,
        admitted: Result<Admitted, Refused>,
        trusted: Option<SessionToken>,
        client: Client,
    ) -> Result<Finished, CallbackError> {
        let fail = flow_failure(&flow);
        let (user, new_user, entered) = match admitted {
            Ok(Admitted::Linked) => return Ok(Finished::Linked { callback_url: flow.callback_url }),
            Ok(Admitted::User { user, new_user, entered }) => (user, new_user, entered),
            Err(Refused::Unavailable) => return Err(CallbackError::Unavailable),
            Err(refused) => return Err(fail(refused.code(), None)),
        };
        let entered = match entered {
            Some(entered) => entered,
            None => self.enter(user, trusted, client).await,
        };
        let entered = entered.map_err(|e| match e {
            // better-auth: the admin plugin's session hook throws BANNED_USER, which the callback turns into
            // `?error=BANNED_USER&error_description=<its message>`.
            CreateSessionError::Banned => fail("BANNED_USER", Some(super::SignInError::Banned.to_string())),
            CreateSessionError::UnknownUser => fail("unable_to_create_session", None),
            CreateSessionError::Unavailable(_) => CallbackError::Unavailable,
        })?;
        Ok(match entered {
            Entry::Session(signed_in, renewed_trust) => Finished::SignedIn {
                signed_in,
                new_user,
                callback_url: flow.callback_url,
                new_user_url: flow.new_user_url,
                renewed_trust,
            },
            Entry::SecondFactor(challenge) => Finished::SecondFactor { challenge, callback_url: flow.callback_url },
            Entry::PasskeyRequired => return Err(fail("passkey_required", None)),
        })
    }

    /// The session `user` signs into through a provider or, for an account with a second factor (and a browser
    /// that is not one of its trusted devices), the challenge: the provider vouches for one factor, as a password
    /// does, and the second is asked for exactly as after `sign-in/email`. `trusted`: the trusted-device cookie.
    /// A sign-in [`admit`](Self::admit) could not finish in the account's commit goes on here: the accounts with a
    /// second factor (and those the users actor saw otherwise, a moment before).
    pub(super) async fn enter(
        &self,
        user: Arc<User>,
        trusted: Option<SessionToken>,
        client: Client,
    ) -> Result<Entry, CreateSessionError> {
        let mut device = None;
        // As after a password (`Accounts::passkey_required`); a banned account is refused as such below.
        if !user.is_banned_at(Timestamp::now()) && self.passkey_required(&user).await {
            return Ok(Entry::PasskeyRequired);
        }
        if user.has_second_factor() {
            // Refused like any sign-in of a banned account, before a challenge says the identity was good.
            if user.is_banned_at(Timestamp::now()) {
                return Err(CreateSessionError::Banned);
            }
            device = trusted.filter(|t| self.trusted_device(user.id, t));
            if device.is_none() {
                return Ok(Entry::SecondFactor(self.actors.users.challenge(user.id, true, None).await?));
            }
        }
        let (token, session) = self.actors.sessions.create(user.id, true, client, Start::SignIn).await?;
        let renewed = match device {
            Some(device) => {
                let next = SessionToken::generate();
                self.actors.users.rotate_trust(device.hash(), next.hash()).await?;
                Some(next)
            }
            None => None,
        };
        let user = self.indexes.users.get(user.id).unwrap_or(user);
        Ok(Entry::Session(SignedIn { token, session, user }, renewed))
    }

    /// An identity `provider` vouched for (in a callback, or in an ID token the client brought): linked to
    /// `link_user`, or the account it signs into, found or made by the users actor under the linking rules (no
    /// silent takeover). A sign-in's session starts in the same commit as the account's records, when the account
    /// needs no second step (none, or `trusted`, this browser's trusted device of it, renewed in that commit);
    /// otherwise it is the caller's to go on with ([`enter`](Self::enter)).
    pub(super) async fn admit(
        &self,
        how: AdmitAs,
        identity: Identity,
        tokens: Tokens,
        link_user: Option<UserId>,
        trusted: Option<SessionToken>,
        client: &Client,
    ) -> Result<Admitted, Refused> {
        let email = identity.email.as_deref().ok_or(Refused::EmailNotFound)?;
        let email = Email::parse(email).map_err(|_| Refused::EmailNotFound)?;
        if how.sso.is_none() && link_user.is_none() && self.sso_refuses_provider(&how, &identity, &email).await? {
            return Err(Refused::SsoRequired);
        }
        let name = identity
            .name
            .as_deref()
            .and_then(|n| Name::parse(n).ok())
            .or_else(|| Name::parse(email.as_str().split('@').next().unwrap_or("user")).ok())
            .ok_or(Refused::UserInfo)?;
        let image = identity.picture.as_deref().and_then(|p| ImageUrl::parse(p).ok());
        let provider_id = &how.provider;
        let sealed_tokens = self.flows.store_tokens.then(|| {
            let plain = serde_json::to_vec(&tokens).unwrap_or_default();
            self.data_key.seal(&plain, &Tokens::context(provider_id, &identity.subject))
        });
        drop(tokens);
        let external = ExternalIdentity {
            sealed_tokens,
            provider: provider_id.clone(),
            subject: identity.subject,
            email,
            email_verified: identity.email_verified,
            name,
            image,
            trusted: how.trusted,
            sign_up_unverified: how.sign_up_unverified,
            sso: how.sso,
        };
        let role = self.roles.default_role();
        // The device's next token, given to the browser if the sign-in goes through the device.
        let next_device = trusted.as_ref().map(|_| SessionToken::generate());
        let start = link_user.is_none().then(|| ExternalStart {
            client: client.clone(),
            verified_only: self.require_verification,
            device: trusted.as_ref().zip(next_device.as_ref()).map(|(old, next)| (old.hash(), next.hash())),
            factor_roles: Arc::clone(&self.two_factor_roles),
        });
        let ip = client.ip_address.clone();
        let signed_in = self.actors.users.external(external, link_user, role, start, ip).await;
        let ExternalSignIn { outcome, session } = signed_in.map_err(|e| match e {
            ExternalError::NotLinked => Refused::NotLinked,
            ExternalError::UnverifiedEmail => Refused::UnverifiedEmail,
            ExternalError::LinkingNotAllowed => Refused::LinkingNotAllowed,
            ExternalError::LinkedElsewhere => Refused::LinkedElsewhere,
            ExternalError::EmailMismatch => Refused::EmailMismatch,
            ExternalError::UserGone => Refused::UserGone,
            ExternalError::Unavailable(_) => Refused::Unavailable,
        })?;
        let (user, new_user) = match outcome {
            ExternalOutcome::Linked(_) if link_user.is_some() => return Ok(Admitted::Linked),
            ExternalOutcome::Existing(user) | ExternalOutcome::Linked(user) => (user, false),
            ExternalOutcome::Created(user) => (user, true),
        };
        // No session was started for it (`verified_only`).
        if self.require_verification && !user.email_verified {
            return Err(Refused::EmailNotVerified);
        }
        let entered = session.map(|ExternalSession { started, device_renewed }| {
            let (token, session) = started?;
            let user = self.indexes.users.get(user.id).unwrap_or_else(|| Arc::clone(&user));
            let renewed = next_device.filter(|_| device_renewed);
            Ok(Entry::Session(SignedIn { token, session, user }, renewed))
        });
        Ok(Admitted::User { user, new_user, entered })
    }

    /// Whether the single sign-on policy refuses a sign-in through a configured provider (`sign-in/social`, a
    /// generic OAuth provider, an ID token) of `email`: the address's domain decides, as for a password, before any
    /// account is made or linked. The provider has proven who this is, so a service administrator's account (the
    /// one the identity is linked to, else the one of the address) keeps this way in as it keeps its password.
    async fn sso_refuses_provider(&self, how: &AdmitAs, identity: &Identity, email: &Email) -> Result<bool, Refused> {
        if !self.sso_refuses_address(email).await.map_err(|_| Refused::Unavailable)? {
            return Ok(false);
        }
        let linked = self.indexes.accounts.by_identity(&how.provider, &identity.subject);
        let account = match linked {
            Some(linked) => self.indexes.users.get(linked.user_id),
            None => self.indexes.users.by_email(email),
        };
        Ok(!account.is_some_and(|user| user.role.is_admin()))
    }

    /// The flow of `hash`, as the store holds it: `NoFlow` when it is not there (taken, or never started).
    pub(super) async fn read_flow(&self, hash: &[u8; 32]) -> Result<OAuthFlowRecordV1, CallbackError> {
        let store = Arc::clone(&self.store);
        let key = *hash;
        let found = tokio::task::spawn_blocking(move || store.flow(&key))
            .await
            .map_err(|_| CallbackError::Unavailable)?
            .map_err(|_| CallbackError::Unavailable)?;
        found.ok_or(CallbackError::NoFlow)
    }

    /// Deletes the flow of `hash` from the store, durably: `NoFlow` when another node took it first. On one node
    /// the caller's [`Claim`] makes it this callback's.
    async fn take_flow(&self, hash: &[u8; 32]) -> Result<(), CallbackError> {
        match self.flows.writer.write(vec![StoreOp::TakeFlow(*hash)]).await {
            Ok(()) => Ok(()),
            Err(StoreError::Conflict(_)) => Err(CallbackError::NoFlow),
            Err(_) => Err(CallbackError::Unavailable),
        }
    }

    /// The identities linked to `user`, oldest first.
    pub fn linked_accounts(&self, user: UserId) -> Vec<Arc<LinkedAccount>> {
        self.indexes.accounts.of_user(user)
    }

    /// Whether `user` has a password (better-auth's "credential" account). An account created through a provider
    /// has none until a reset or an administrator sets one.
    pub fn has_password(user: &User) -> bool {
        !user.password_hash().as_phc().is_empty()
    }

    /// Removes one way into `user`'s account: a linked identity (`Some(id)`) or the password; never the last.
    pub async fn unlink(
        &self,
        user: UserId,
        account: Option<[u8; 16]>,
        by: UserId,
        ip: &str,
    ) -> Result<(), UnlinkError> {
        self.actors.users.unlink(user, account, by, ip.to_owned()).await
    }

    pub fn oauth(&self) -> &OAuth {
        &self.flows.oauth
    }
}

/// The flow's error redirect: to its error URL (else its callback URL) with `?error=code`.
pub(super) fn flow_failure(flow: &OAuthFlowRecordV1) -> impl Fn(&'static str, Option<String>) -> CallbackError + use<> {
    let error_url = flow.error_url.clone().unwrap_or_else(|| flow.callback_url.clone());
    move |code, description| CallbackError::Redirect { error_url: error_url.clone(), code, description }
}

fn sha256(text: &str) -> [u8; 32] {
    Sha256::digest(text.as_bytes()).into()
}
