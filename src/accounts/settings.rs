//! The settings a reload may replace while the server runs (`service-auth reload`, SIGHUP): each is held behind
//! an `ArcSwap`, read without a lock on every request, and swapped whole, so a request sees the old settings or
//! the new ones, never half of each.

use std::sync::Arc;

use super::{Accounts, MailError, PasswordCheck};
use crate::actors::Unavailable;
use crate::config::Config;
use crate::domain::{Email, MailId, UserId, action};
use crate::store::{StoreOp, audit, convert};

impl Accounts {
    /// Puts the facade's live settings of `config` in effect: the password policy (`[passwords]`, and
    /// `[two_factor] issuer`, one of its context words), `[session] fresh_age_secs`, and the mail transport and
    /// sender (`[email] smtp_url` or `directory`, `from`), the webhooks' delivery limits (`[webhooks]`, see
    /// `DeliverySettings`). `config` has been validated.
    pub fn apply_settings(&self, config: &Config) {
        self.passwords.store(Arc::new(PasswordCheck::new(config)));
        self.fresh_age.store(Arc::new(config.session.fresh_age()));
        if let Some(outbox) = &self.outbox {
            outbox.apply(config);
        }
        self.webhook_delivery.apply(&config.webhooks);
    }

    /// The audit entry of a reload, durable before the reload is answered. `detail` names the sections that
    /// changed and those left for a restart (never a value: a section may hold a secret).
    pub async fn audit_reload(&self, detail: String) -> Result<(), Unavailable> {
        self.audit.write(crate::store::audit::entry(action::SETTINGS_RELOADED, None, None, "", detail)).await
    }

    /// An administrator's test message to `to`, in the durable outbox with its audit entry in one commit (the
    /// sender takes it from there, as every other message): what the status page's "Send a test mail" does.
    pub async fn send_test_mail(&self, by: UserId, to: &Email, ip: &str) -> Result<MailId, MailError> {
        let (Some(templates), Some(queue)) = (&self.templates, &self.outbox) else {
            return Err(MailError::NotConfigured);
        };
        if queue.is_full() {
            return Err(MailError::OutboxFull);
        }
        let mail = templates.render_test(to);
        let logged = audit::entry(action::MAIL_TEST_QUEUED, Some(by), None, ip, format!("to {}", to.as_str()));
        self.audit.commit(vec![StoreOp::PutOutbox(convert::mail_record(&mail)), logged]).await?;
        let id = mail.id;
        queue.push(mail);
        Ok(id)
    }

    /// How the mail sender's last attempt on this node ended (`None`: no transport, or no attempt yet).
    pub fn last_delivery(&self) -> Option<crate::mail::Delivery> {
        self.outbox.as_ref().and_then(crate::mail::MailQueue::last_delivery)
    }
}
