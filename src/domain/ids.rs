use std::fmt;

use uuid::Uuid;

macro_rules! id_type {
    ($(#[$doc:meta])* $name:ident) => {
        $(#[$doc])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
        pub struct $name(Uuid);

        impl $name {
            /// A new UUID v7: ids sort by creation time, which keeps list order and B-tree inserts cheap.
            pub fn new() -> Self {
                Self(Uuid::now_v7())
            }

            pub fn parse(s: &str) -> Option<Self> {
                // Only the hyphenated form: `Uuid::parse_str` also takes braces and `urn:uuid:`, which no
                // client of ours sends and which would make two spellings of one id.
                (s.len() == 36).then(|| Uuid::try_parse(s).ok()).flatten().map(Self)
            }

            pub fn from_bytes(bytes: [u8; 16]) -> Self {
                Self(Uuid::from_bytes(bytes))
            }

            pub fn to_bytes(self) -> [u8; 16] {
                self.0.into_bytes()
            }

            /// Appends the hyphenated lower-case form, as bytes (the session check writes JSON by hand).
            pub fn append_hyphenated(self, out: &mut Vec<u8>) {
                out.extend_from_slice(self.0.hyphenated().encode_lower(&mut Uuid::encode_buffer()).as_bytes());
            }
        }

        /// The plain UUID, for places that hold an id of either kind (an audit entry's target).
        impl From<$name> for Uuid {
            fn from(id: $name) -> Uuid {
                id.0
            }
        }

        impl Default for $name {
            fn default() -> Self {
                Self::new()
            }
        }

        /// As the hyphenated string, written without an intermediate allocation.
        impl serde::Serialize for $name {
            fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
                s.serialize_str(self.0.hyphenated().encode_lower(&mut Uuid::encode_buffer()))
            }
        }

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                self.0.hyphenated().fmt(f)
            }
        }
    };
}

id_type!(
    /// Identifier of a user account.
    UserId
);
id_type!(
    /// Identifier of an organization.
    OrgId
);
id_type!(
    /// Identifier of an audit entry; as a UUID v7 it orders the log by time.
    AuditId
);
id_type!(
    /// Identifier of a message in the outbox; as a UUID v7 it orders the outbox by time.
    MailId
);
id_type!(
    /// Identifier of a session (not its token).
    SessionId
);
id_type!(
    /// Identifier of a membership: derived from its organization and user ([`MemberId::of`]), so the same pair
    /// always has the same id, on every node and after an upgrade that writes the records of older memberships.
    MemberId
);
id_type!(
    /// Identifier of an invitation. Made by [`InvitationId::random`]: the id is what the mailed link carries, so it
    /// must not be guessable (a UUID v7 has a clock in it).
    InvitationId
);
id_type!(
    /// Identifier of an API key (not its secret).
    ApiKeyId
);
id_type!(
    /// Identifier of a passkey (not its credential id, which the authenticator chose).
    PasskeyId
);

id_type!(
    /// Identifier of a role an organization defined.
    RoleId
);
id_type!(
    /// Identifier of a team of an organization.
    TeamId
);
id_type!(
    /// Identifier of a user's place in a team: derived from the team and the user ([`TeamMemberId::of`]), as a
    /// membership's is, so it is not stored and one user is in a team once.
    TeamMemberId
);

impl TeamMemberId {
    pub fn of(team: TeamId, user: UserId) -> Self {
        use sha2::{Digest, Sha256};
        let digest = Sha256::new()
            .chain_update(b"team-member")
            .chain_update(team.to_bytes())
            .chain_update(user.to_bytes())
            .finalize();
        let mut bytes = [0; 16];
        bytes.copy_from_slice(&digest[..16]);
        Self(uuid::Builder::from_custom_bytes(bytes).into_uuid())
    }
}

impl MemberId {
    pub fn of(org: OrgId, user: UserId) -> Self {
        use sha2::{Digest, Sha256};
        let digest =
            Sha256::new().chain_update(b"member").chain_update(org.to_bytes()).chain_update(user.to_bytes()).finalize();
        let mut bytes = [0; 16];
        bytes.copy_from_slice(&digest[..16]);
        Self(uuid::Builder::from_custom_bytes(bytes).into_uuid())
    }
}

impl InvitationId {
    /// 122 random bits (a UUID v4).
    pub fn random() -> Self {
        Self(Uuid::new_v4())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_only_the_hyphenated_form() {
        let id = UserId::new();
        assert_eq!(UserId::parse(&id.to_string()), Some(id));
        assert_eq!(UserId::parse(&id.to_string().to_uppercase()), Some(id));
        assert_eq!(UserId::parse(&id.to_string().replace('-', "")), None);
        assert_eq!(UserId::parse(&format!("{{{id}}}")), None);
        assert_eq!(UserId::parse("not-a-uuid"), None);
    }

    #[test]
    fn new_ids_sort_by_creation() {
        let a = OrgId::new();
        let b = OrgId::new();
        assert!(a < b);
    }
}
