//! Usernames (better-auth's `username` plugin): the availability check and sign-in by username. Sign-up and
//! update-user carry a username through their own calls (`auth.rs`, `account.rs`); the users actor keeps names
//! unique, look-alikes included.

use super::{Accounts, Client, SignInError, SignInOutcome};
use crate::domain::{Email, Password, SessionToken, User, Username, UsernameRules, username_skeleton};

impl Accounts {
    /// `[username]`'s rules, when usernames are on.
    pub fn username_rules(&self) -> Option<&UsernameRules> {
        self.usernames.as_deref()
    }

    /// Whether `name` (`typed` so) could be taken now: not reserved, and neither it nor a look-alike is an
    /// account's, as sign-up would judge it with the display form it defaults to. A reserved name answers as a
    /// taken one, so the answer does not tell the two apart.
    pub fn username_available(&self, name: &Username, typed: &str) -> bool {
        !self.username_refused(Some(name), Some(typed), None)
    }

    /// Whether `name` or `display` (a display form, as typed) is, or looks like, a reserved name or another
    /// account's username than `me`'s. The display form is checked as typed and lower-cased, since it is shown
    /// as typed (`PayPaI` beside `paypal`). The users actor checks the name again, in order with other changes.
    pub(super) fn username_refused(&self, name: Option<&Username>, display: Option<&str>, me: Option<&User>) -> bool {
        let own = me.and_then(User::username).map(Username::skeleton);
        let mut skeletons: Vec<Box<str>> = name.map(Username::skeleton).into_iter().collect();
        if let Some(display) = display {
            skeletons.push(username_skeleton(display));
            let cased: Box<str> =
                unicode_security::skeleton(display).flat_map(char::to_lowercase).collect::<String>().into();
            skeletons.push(cased);
        }
        let rules = self.usernames.as_deref();
        skeletons.iter().any(|skeleton| {
            let mine = own.as_deref() == Some(&**skeleton);
            let reserved = rules.is_some_and(|r| r.is_reserved_skeleton(skeleton));
            let owner = self.indexes.users.username_skeleton_owner(skeleton);
            (reserved && !mine) || owner.is_some_and(|id| me.is_none_or(|me| me.id != id))
        })
    }

    /// A sign-in with username and password: the sign-in by e-mail of the account that has the name, with the
    /// same failure budget and lock (the account's, under its address). An unknown name costs the same
    /// verifications as an unknown address, its failures counted under a key of its own
    /// (`<name>@username.invalid`: the `.invalid` domain is reserved and no mail goes there), so the answer and
    /// its time do not tell which names exist.
    pub async fn sign_in_username(
        &self,
        name: Username,
        password: Password,
        remember_me: bool,
        trusted: Option<SessionToken>,
        client: Client,
    ) -> Result<SignInOutcome, SignInError> {
        let user = self.indexes.users.by_username(&name);
        let key = match &user {
            Some(user) => user.email_address(),
            None => Email::from_trusted(format!("{name}@username.invalid")),
        };
        self.sign_in_counted(super::auth::SignInBy::Username, key, user, password, remember_me, trusted, client).await
    }
}
