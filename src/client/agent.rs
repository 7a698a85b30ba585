//! The agent's side: what `cru notify / ask / approve` and `cru mcp` use. An agent
//! process finds its session handle and the daemon's socket in its environment and acts
//! for its own session only.

use std::path::PathBuf;
use std::time::Duration;

use super::{Client, ClientError};
use crate::protocol::methods;
use crate::protocol::{Handle, MsgType, SendParams, WaitParams, code};

use crate::protocol::env::HANDLE as HANDLE_ENV;
use crate::protocol::env::SOCKET as SOCKET_ENV;

#[derive(Debug, thiserror::Error)]
pub enum AgentError {
    #[error("{HANDLE_ENV} is not set: run this inside a crucible session")]
    NoHandle,
    #[error("{HANDLE_ENV} does not hold a session handle")]
    BadHandle,
    #[error("{SOCKET_ENV} is not set: run this inside a crucible session")]
    NoSocket,
    #[error("the session handle is unknown or revoked (the session has ended)")]
    Revoked,
    #[error(transparent)]
    Client(#[from] ClientError),
}

/// The human's reply to a question.
#[derive(Debug, Clone, PartialEq)]
pub enum Answer {
    /// The answer (for approvals: `approve` or `deny`, or the option chosen).
    Chosen(String),
    /// No answer within the timeout.
    TimedOut,
    /// Closed without an answer (the session stopped or was deleted); says why.
    Withdrawn(String),
}

/// A connection scoped to the agent's own session.
pub struct AgentLink {
    client: Client,
    session_id: String,
}

impl AgentLink {
    /// Connects with the handle and socket from the environment.
    pub async fn from_env() -> Result<Self, AgentError> {
        let handle = std::env::var(HANDLE_ENV).map_err(|_| AgentError::NoHandle)?;
        let handle = Handle::parse(handle.trim()).ok_or(AgentError::BadHandle)?;
        let socket = std::env::var_os(SOCKET_ENV).ok_or(AgentError::NoSocket)?;
        Self::connect(&PathBuf::from(socket), &handle).await
    }

    pub async fn connect(socket: &std::path::Path, handle: &Handle) -> Result<Self, AgentError> {
        let client = match Client::connect_at(socket, Some(handle)).await {
            Ok(client) => client,
            Err(e) if e.rpc_code() == Some(code::FORBIDDEN) => return Err(AgentError::Revoked),
            Err(e) => return Err(e.into()),
        };
        let session_id = client
            .daemon()
            .session_id
            .clone()
            .ok_or(AgentError::Revoked)?;
        Ok(Self { client, session_id })
    }

    pub fn session_id(&self) -> &str {
        &self.session_id
    }

    async fn send(
        &self,
        msg_type: MsgType,
        title: &str,
        body: Option<&str>,
        options: Option<&[String]>,
    ) -> Result<String, AgentError> {
        let params = SendParams {
            session_id: self.session_id.clone(),
            msg_type,
            title: title.to_string(),
            body: body.map(String::from),
            options: options.map(<[String]>::to_vec),
            option_kinds: None,
            flagged: None,
        };
        let sent = self
            .client
            .call::<methods::InboxSend>(&params)
            .await
            .map_err(revoked)?;
        Ok(sent.id)
    }

    /// Posts an `info` message; returns its id.
    /// A credential by name: the human approves it the first time in the session.
    pub async fn secret(&self, name: &str) -> Result<String, AgentError> {
        let reply = self
            .client
            .call::<methods::SecretGet>(&crate::protocol::SecretParams {
                session_id: self.session_id.clone(),
                name: name.to_string(),
            })
            .await?;
        Ok(reply.value)
    }

    pub async fn notify(&self, title: &str, body: Option<&str>) -> Result<String, AgentError> {
        self.send(MsgType::Info, title, body, None).await
    }

    /// Asks a `decision_needed` question and waits for the answer.
    pub async fn ask(
        &self,
        question: &str,
        options: &[String],
        body: Option<&str>,
        timeout: Option<Duration>,
    ) -> Result<Answer, AgentError> {
        let options = (!options.is_empty()).then_some(options);
        let id = self
            .send(MsgType::DecisionNeeded, question, body, options)
            .await?;
        self.wait(&id, timeout).await
    }

    /// Asks for approval and waits: `Chosen("approve")` or `Chosen("deny")`.
    pub async fn approve(
        &self,
        action: &str,
        body: Option<&str>,
        timeout: Option<Duration>,
    ) -> Result<Answer, AgentError> {
        let id = self
            .send(MsgType::ApprovalRequired, action, body, None)
            .await?;
        self.wait(&id, timeout).await
    }

    async fn wait(&self, id: &str, timeout: Option<Duration>) -> Result<Answer, AgentError> {
        let params = WaitParams {
            id: id.to_string(),
            timeout_secs: timeout.map(|t| t.as_secs().max(1)),
        };
        let message = match self.client.call::<methods::InboxWait>(&params).await {
            Ok(reply) => reply.message,
            Err(e) if e.rpc_code() == Some(code::TIMED_OUT) => return Ok(Answer::TimedOut),
            Err(e) => return Err(revoked(e)),
        };
        let response = message.response.unwrap_or_default();
        Ok(if message.withdrawn {
            Answer::Withdrawn(response)
        } else {
            Answer::Chosen(response)
        })
    }
}

fn revoked(e: ClientError) -> AgentError {
    if e.rpc_code() == Some(code::FORBIDDEN) {
        AgentError::Revoked
    } else {
        e.into()
    }
}
