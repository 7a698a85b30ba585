//! Emoji (SAS) verification of the bot's device by an allowed user. A request or a
//! start from an allowed user is accepted (anyone else's is cancelled); once the keys
//! are exchanged the seven emoji are shown where the person compares them: in
//! `daemon.status`, in the log, and as a `matrix.verification` event the workbench shows
//! in its banner. The bot confirms only on the person's word (`matrix.verify`, `cru daemon
//! verify`), and cancels on a mismatch, when the other side cancels, or when no word comes
//! in time.

use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use matrix_sdk::encryption::verification::{
    SasState, SasVerification, Verification, VerificationRequest, VerificationRequestState,
};
use matrix_sdk::ruma::UserId;
use matrix_sdk::ruma::events::key::verification::VerificationMethod;
use matrix_sdk::ruma::events::key::verification::request::ToDeviceKeyVerificationRequestEvent;
use matrix_sdk::ruma::events::key::verification::start::{
    OriginalSyncKeyVerificationStartEvent, ToDeviceKeyVerificationStartEvent,
};
use matrix_sdk::ruma::events::room::message::{MessageType, OriginalSyncRoomMessageEvent};

use super::Bot;
use crate::daemon::matrix_share::Word;
use crate::protocol::{MatrixVerification, VerificationEmoji, VerificationState};

/// How long the emoji wait for the person's word before the bot cancels.
const WORD_WAIT: Duration = Duration::from_secs(10 * 60);

/// Listens for verification requests and starts, to-device and in rooms.
pub(super) fn listen(bot: &Arc<Bot>) {
    let client = &bot.client;
    let b = Arc::clone(bot);
    client.add_event_handler(move |ev: ToDeviceKeyVerificationRequestEvent| {
        let bot = Arc::clone(&b);
        async move { requested(&bot, &ev.sender, ev.content.transaction_id.as_str()).await }
    });
    let b = Arc::clone(bot);
    client.add_event_handler(move |ev: OriginalSyncRoomMessageEvent| {
        let bot = Arc::clone(&b);
        async move {
            if matches!(ev.content.msgtype, MessageType::VerificationRequest(_)) {
                requested(&bot, &ev.sender, ev.event_id.as_str()).await;
            }
        }
    });
    let b = Arc::clone(bot);
    client.add_event_handler(move |ev: ToDeviceKeyVerificationStartEvent| {
        let bot = Arc::clone(&b);
        async move { started(&bot, &ev.sender, ev.content.transaction_id.as_str()).await }
    });
    let b = Arc::clone(bot);
    client.add_event_handler(move |ev: OriginalSyncKeyVerificationStartEvent| {
        let bot = Arc::clone(&b);
        async move { started(&bot, &ev.sender, ev.content.relates_to.event_id.as_str()).await }
    });
}

/// Whether `user` may verify the bot.
fn may_verify(bot: &Bot, user: &UserId) -> bool {
    user != bot.own && bot.config.allows(user.as_str())
}

/// A verification request: accepted (emoji only) from an allowed user, else cancelled.
async fn requested(bot: &Arc<Bot>, sender: &UserId, flow_id: &str) {
    let encryption = bot.client.encryption();
    let Some(request) = encryption.get_verification_request(sender, flow_id).await else {
        return;
    };
    if !may_verify(bot, sender) {
        tracing::info!(user = %sender, "matrix: cancelled a verification request of a user who is not in allowed_users");
        let _ = request.cancel().await;
        return;
    }
    if let Err(e) = request
        .accept_with_methods(vec![VerificationMethod::SasV1])
        .await
    {
        tracing::warn!(user = %sender, "matrix: cannot accept a verification request: {e}");
        return;
    }
    tracing::info!(user = %sender, flow = flow_id, "matrix: accepted a verification request");
    let device = match request.state() {
        VerificationRequestState::Ready {
            other_device_data, ..
        }
        | VerificationRequestState::Requested {
            other_device_data, ..
        } => other_device_data.device_id().to_string(),
        _ => String::new(),
    };
    show(
        bot,
        MatrixVerification {
            user_id: sender.to_string(),
            device_id: device,
            flow_id: flow_id.to_string(),
            state: VerificationState::Requested,
            ..Default::default()
        },
    );
    tokio::spawn(follow_request(Arc::clone(bot), request));
}

/// A request goes on as emoji: whichever side starts them, the bot follows.
async fn follow_request(bot: Arc<Bot>, request: VerificationRequest) {
    let mut changes = request.changes();
    while let Some(state) = changes.next().await {
        match state {
            VerificationRequestState::Transitioned {
                verification: Verification::SasV1(sas),
                ..
            } => {
                run(bot, sas, request.flow_id().to_string()).await;
                return;
            }
            VerificationRequestState::Cancelled(info) => {
                ended(
                    &bot,
                    request.other_user_id(),
                    request.flow_id(),
                    info.reason(),
                );
                return;
            }
            VerificationRequestState::Done => return,
            _ => {}
        }
    }
}

/// An emoji verification started by the other side (with or without a request first).
async fn started(bot: &Arc<Bot>, sender: &UserId, flow_id: &str) {
    let encryption = bot.client.encryption();
    let Some(Verification::SasV1(sas)) = encryption.get_verification(sender, flow_id).await else {
        return;
    };
    if !may_verify(bot, sender) {
        tracing::info!(user = %sender, "matrix: cancelled a verification of a user who is not in allowed_users");
        let _ = sas.cancel().await;
        return;
    }
    tokio::spawn(run(Arc::clone(bot), sas, flow_id.to_string()));
}

/// Takes an emoji verification to its end: accepts it, shows the emoji, and confirms on
/// the person's word only. Each verification is run once, however it was reached.
async fn run(bot: Arc<Bot>, sas: SasVerification, flow_id: String) {
    if !bot.first_time(format!("verification {flow_id}")) {
        return;
    }
    let mut shown = MatrixVerification {
        user_id: sas.other_user_id().to_string(),
        device_id: sas.other_device().device_id().to_string(),
        flow_id: flow_id.clone(),
        state: VerificationState::Requested,
        ..Default::default()
    };
    let mut changes = sas.changes();
    if matches!(sas.state(), SasState::Started { .. })
        && let Err(e) = sas.accept().await
    {
        tracing::warn!(user = %shown.user_id, "matrix: cannot accept an emoji verification: {e}");
        return;
    }
    let mut word = None;
    loop {
        tokio::select! {
            state = changes.next() => match state {
                Some(SasState::KeysExchanged { emojis, decimals }) => {
                    shown.state = VerificationState::Emoji;
                    shown.emoji = emojis.map(|e| e.emojis.iter().map(|e| VerificationEmoji {
                        symbol: e.symbol.to_string(),
                        description: e.description.to_string(),
                    }).collect()).unwrap_or_default();
                    shown.decimals = Some([decimals.0, decimals.1, decimals.2]);
                    tracing::info!(user = %shown.user_id, device = %shown.device_id, emoji = %shown.emoji_line(), "matrix: compare these emoji with the ones your Matrix client shows, then `cru daemon verify --confirm` (or `--cancel`)");
                    word = Some(bot.status.wait_for_word(&flow_id));
                    show(&bot, shown.clone());
                }
                Some(SasState::Done { .. }) => {
                    shown.state = VerificationState::Done;
                    tracing::info!(user = %shown.user_id, device = %shown.device_id, "matrix: verified by emoji");
                    break;
                }
                Some(SasState::Cancelled(info)) => {
                    shown.state = VerificationState::Cancelled;
                    shown.reason = Some(info.reason().to_string());
                    tracing::info!(user = %shown.user_id, reason = info.reason(), "matrix: the emoji verification was cancelled");
                    break;
                }
                Some(_) => {}
                None => break,
            },
            heard = wait(&mut word) => {
                word = None;
                match heard {
                    Some(heard) => said(&bot, &sas, &mut shown, heard).await,
                    // No word in time.
                    None => {
                        tracing::info!(user = %shown.user_id, "matrix: no word on the emoji in time: the verification is cancelled");
                        let _ = sas.cancel().await;
                    }
                }
            }
        }
    }
    bot.status.stop_waiting(&flow_id);
    show(&bot, shown);
}

/// The person's word, once the emoji are shown: `None` when it does not come in time
/// (or the wait was replaced); pending while the emoji are not shown yet.
async fn wait(word: &mut Option<tokio::sync::oneshot::Receiver<Word>>) -> Option<Word> {
    match word {
        Some(heard) => tokio::time::timeout(WORD_WAIT, heard).await.ok()?.ok(),
        None => std::future::pending().await,
    }
}

/// Acts on the person's word and tells them how the verification stands.
async fn said(bot: &Bot, sas: &SasVerification, shown: &mut MatrixVerification, word: Word) {
    let acted = match word.confirm {
        true => sas.confirm().await,
        false => sas.mismatch().await,
    };
    match (acted, word.confirm) {
        (Err(e), _) => {
            tracing::warn!(user = %shown.user_id, "matrix: cannot answer the emoji verification: {e}");
            shown.reason = Some(e.to_string());
        }
        (Ok(()), true) => {
            shown.state = match sas.is_done() {
                true => VerificationState::Done,
                false => VerificationState::Confirmed,
            };
        }
        (Ok(()), false) => {
            shown.state = VerificationState::Cancelled;
            shown.reason = Some("the emoji did not match".into());
        }
    }
    show(bot, shown.clone());
    let _ = word.done.send(shown.clone());
}

/// A verification that ended before its emoji were compared.
fn ended(bot: &Bot, user: &UserId, flow_id: &str, reason: &str) {
    tracing::info!(user = %user, reason, "matrix: the verification request was cancelled");
    bot.status.stop_waiting(flow_id);
    show(
        bot,
        MatrixVerification {
            user_id: user.to_string(),
            flow_id: flow_id.to_string(),
            state: VerificationState::Cancelled,
            reason: Some(reason.to_string()),
            ..Default::default()
        },
    );
}

/// Puts the verification in the status and tells the daemon's subscribers.
fn show(bot: &Bot, verification: MatrixVerification) {
    bot.set_status(|s| s.verification = Some(verification.clone()));
    bot.door.tell_verification(verification);
}
