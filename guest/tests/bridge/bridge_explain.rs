//! Scenario: `/connect explain` answers "why did the bot not answer?" from the decisions the
//! bridge made on real envelopes, newest first, without any message text (I2).

use guest::model::Level;

use crate::support::{FakeHost, chatter, default_bridge, dm};

#[test]
fn explain_lists_what_happened_to_each_message_and_never_its_text() {
    let mut host = FakeHost::new();
    let mut bridge = default_bridge(&mut host);
    host.script_code("111111");

    bridge.on_envelope(&mut host, chatter("tg", "group", "u9", "lunch anyone?"));
    bridge.on_envelope(&mut host, dm("tg", "c1", "u1", "hi"));
    bridge.on_envelope(&mut host, dm("tg", "c1", "u1", "222222"));
    bridge.on_envelope(&mut host, dm("tg", "c1", "u1", "111111"));
    host.now += 60_000;
    bridge.on_envelope(&mut host, dm("tg", "c1", "u1", "/status"));
    bridge.on_envelope(&mut host, dm("tg", "c1", "u1", "/pause"));
    bridge.on_envelope(&mut host, dm("tg", "c1", "u1", "deploy the secret plan"));

    let note = bridge.on_local_command(&mut host, "explain");

    assert_eq!(note.level, Level::Info);
    assert_eq!(
        note.text,
        "bot-connect explain: the last 7 message(s), newest first\n\
         - 0s ago in tg:c1 from tg:u1: not forwarded: the chat is paused. Send /resume there, or /connect resume here.\n\
         - 0s ago in tg:c1 from tg:u1: answered the command /pause.\n\
         - 0s ago in tg:c1 from tg:u1: answered the command /status.\n\
         - 1m ago in tg:c1 from tg:u1: paired with the code from this terminal.\n\
         - 1m ago in tg:c1 from tg:u1: not paired: the code typed was wrong. See it with /connect pair.\n\
         - 1m ago in tg:c1 from tg:u1: not paired: a new pairing code was shown on this terminal. See it with /connect pair.\n\
         - 1m ago in tg:group from tg:u9: ignored: a group message that did not address the bot. Mention it, reply to it, or start with a configured prefix (bridge.requireAddressing)."
    );
    for text in ["lunch", "secret plan", "111111", "222222"] {
        assert!(
            !note.text.contains(text),
            "message text {text:?} in explain"
        );
    }
}
