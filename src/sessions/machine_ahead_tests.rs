//! A usage limit the agent announces ahead: the running turn ends as it would, then the
//! session parks until the reset instead of starting a turn that would fail; a prompt
//! waiting (or the next one sent) asks the fallback chain once.

use super::*;

fn ahead(secs: u64) -> SessionInput {
    SessionInput::LimitAhead {
        why: "the agent announced its five-hour limit is reached".into(),
        wait: std::time::Duration::from_secs(secs),
        resumes: "15:00:00".into(),
    }
}

fn fallbacks(fx: &[Effect]) -> usize {
    fx.iter().filter(|e| **e == Effect::FallBack).count()
}

#[test]
fn announced_in_a_turn_it_waits_for_the_turn_then_parks_and_the_next_prompt_falls_back() {
    let mut m = acp();
    for input in working("go") {
        m.step(input);
    }
    // During the turn: nothing yet (the turn's end brings it again).
    assert!(m.step(ahead(600)).is_empty());
    m.step(ended("end_turn"));
    let fx = m.step(ahead(590));
    assert!(
        fx.contains(&set(
            SessionState::Parked,
            "usage limit reached: resumes at 15:00:00"
        )),
        "{fx:?}"
    );
    assert!(fx.contains(&Effect::WakeAfter(std::time::Duration::from_secs(590))));
    // Nothing waits: no fallback yet.
    assert_eq!(fallbacks(&fx), 0, "{fx:?}");
    // The next prompt waits for the reset and asks the chain, once.
    let fx = m.step(prompt("next"));
    assert!(prompts_sent(&fx).is_empty(), "{fx:?}");
    assert_eq!(fallbacks(&fx), 1, "{fx:?}");
    let fx = m.step(prompt("and another"));
    assert_eq!(fallbacks(&fx), 0, "{fx:?}");
    // At the reset the waiting prompts run here.
    let fx = m.step(SessionInput::LimitReset);
    assert_eq!(prompts_sent(&fx), ["next"]);
}

#[test]
fn announced_with_a_prompt_waiting_it_falls_back_at_once() {
    let mut m = acp();
    for input in idle() {
        m.step(input);
    }
    // A prompt kept waiting (behind a budget reached, say) is the next turn.
    m.queue.push_back("waiting".into());
    let fx = m.step(ahead(60));
    assert_eq!(fallbacks(&fx), 1, "{fx:?}");
    assert!(prompts_sent(&fx).is_empty(), "{fx:?}");
}

#[test]
fn a_limit_already_reset_or_a_stopping_session_is_not_parked() {
    let mut m = acp();
    for input in idle() {
        m.step(input);
    }
    assert!(m.step(ahead(0)).is_empty());
    m.step(stop(false));
    assert!(m.step(ahead(60)).is_empty());
}

fn prompts_sent(fx: &[Effect]) -> Vec<String> {
    fx.iter()
        .filter_map(|e| match e {
            Effect::Prompt { text, .. } => Some(text.clone()),
            _ => None,
        })
        .collect()
}
