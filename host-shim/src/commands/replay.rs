//! `host-shim replay`: a transcript's inputs through a fresh component instance, with the
//! recorded clock and the host's recorded answers, and where the new effects differ.
//!
//! Deterministic by construction: the clock shows each input's recorded time, the imports
//! answer from the [`Script`] (never a messenger, the agent, the terminal or a file), and
//! random bytes are the recorded ones or, where withheld, a fixed sequence.

use std::path::Path;
use std::sync::{Arc, Mutex};

use crate::disk::lock::LockDir;
use crate::disk::state_file::StateFile;
use crate::local::clock::ManualClock;
use crate::local::logging::MemoryLog;
use crate::local::ui::RecordingUi;
use crate::sandbox::imports::{Given, SessionContext, SessionHost};
use crate::sandbox::runtime::{Instance, Limits, Runtime};
use crate::sandbox::session::{calls, describe_trap};
use crate::transcript::Transcript;
use crate::transcript::line::{Dir, Event};
use crate::transcript::read::Parsed;
use crate::transcript::script::Script;

/// Why a transcript could not be replayed at all.
#[derive(Debug, thiserror::Error)]
pub enum ReplayError {
    /// Nothing to feed.
    #[error("the transcript holds no input line")]
    NoInputs,
    /// The first input is not a `configure`: the file starts mid-session.
    #[error(
        "the first input (line {line}, {kind}) is not a configure: this file starts in the \
         middle of a session (a rotated-out part?). Replay the file that holds the session's \
         start."
    )]
    StartsMidSession {
        /// Line number.
        line: usize,
        /// Its kind.
        kind: String,
    },
    /// The component could not be instantiated.
    #[error("{0}")]
    Instantiate(String),
    /// The empty, read-only state replay gives the bridge could not be set up.
    #[error("cannot set up the replay's empty state: {0}")]
    State(String),
}

/// One place where the new run's effects differ from the recorded ones.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Difference {
    /// Line number of the expected effect; of the input when an effect is missing there.
    pub line: usize,
    /// Line number of the input whose effects differ.
    pub input_line: usize,
    /// The recorded effect (JSON), if any at this position.
    pub expected: Option<String>,
    /// The new run's effect (JSON), if any at this position.
    pub got: Option<String>,
}

/// What a replay found.
#[derive(Debug, Clone, Default)]
pub struct Report {
    /// Inputs fed.
    pub inputs: usize,
    /// Recorded effects compared.
    pub effects: usize,
    /// The first difference of each input whose effects differ, in order.
    pub differences: Vec<Difference>,
    /// The bridge build that recorded the transcript (empty: not recorded).
    pub recorded_bridge: String,
    /// The bridge build that replayed it.
    pub replayed_bridge: String,
}

/// The context of the replayed session: no transport, no file, the script answers.
fn context(
    key: &str,
    clock: Arc<ManualClock>,
    transcript: Transcript,
    script: Script,
) -> Result<SessionContext, ReplayError> {
    // Never read or written: `store` answers from the script. A path that does not exist
    // opens as an empty, read-only state.
    let nowhere = std::env::temp_dir().join("host-shim-replay-has-no-state");
    let (state, _) = StateFile::open_read_only(&nowhere.join("state.json"))
        .map_err(|e| ReplayError::State(e.to_string()))?;
    let (inbound, _) = transport_core::inbound::channel(1);
    Ok(SessionContext {
        transcript: Some(transcript),
        script: Some(Box::new(script)),
        ..SessionContext::new(Given {
            key: key.to_string(),
            inbound,
            agent: Arc::new(crate::agent::IdleAgent),
            ui: Arc::new(RecordingUi::default()),
            state: Arc::new(Mutex::new(state)),
            locks: LockDir::new(nowhere.join("locks")),
            pairing: crate::sandbox::pairing_budget::PairingBudget::default(),
            clock,
            log: Arc::new(MemoryLog::default()),
        })
    })
}

/// The instance, or the context while there is none (before the first `configure`,
/// after a trap).
enum Slot {
    Live(Box<Instance>),
    Idle(Box<SessionContext>),
    Moving,
}

struct Driver<'a> {
    runtime: &'a Runtime,
    slot: Slot,
    transcript: Transcript,
}

impl Driver<'_> {
    fn take_context(&mut self) -> SessionContext {
        match std::mem::replace(&mut self.slot, Slot::Moving) {
            Slot::Live(instance) => instance.store.into_data().into_context(),
            Slot::Idle(ctx) => *ctx,
            Slot::Moving => unreachable!("the context is only moving inside this driver's calls"),
        }
    }

    /// A fresh instance, as the live host makes for every `configure`.
    async fn fresh(&mut self) -> Result<(), ReplayError> {
        let ctx = self.take_context();
        let instance = self
            .runtime
            .instantiate(SessionHost::new(ctx))
            .await
            .map_err(|e| ReplayError::Instantiate(format!("{e:#}")))?;
        self.slot = Slot::Live(Box::new(instance));
        Ok(())
    }

    /// The session's context, in the instance or waiting for one.
    fn context_mut(&mut self) -> Option<&mut SessionContext> {
        match &mut self.slot {
            Slot::Live(instance) => Some(&mut instance.store.data_mut().ctx),
            Slot::Idle(ctx) => Some(&mut **ctx),
            Slot::Moving => None,
        }
    }

    fn record(&mut self, event: Event) {
        let at = self.context_mut().map_or(0, |ctx| ctx.clock.now_ms());
        self.transcript.record(at, event);
    }

    /// One input into the instance; effects land in the transcript.
    async fn feed(&mut self, event: &Event) -> Result<(), ReplayError> {
        if let Some(script) = self.context_mut().and_then(|ctx| ctx.script.as_mut()) {
            script.next_input();
        }
        if let Event::Configure { sources, .. } = event {
            // The new run masks what its config makes a code, as the recording did.
            self.transcript.configure(sources);
            self.fresh().await?;
        }
        let Slot::Live(instance) = &mut self.slot else {
            // No instance (it trapped and the recording has no new configure): the live
            // host delivered nothing either.
            return Ok(());
        };
        let fuel = instance.store.data().call_fuel;
        let _ = instance.store.set_fuel(fuel);
        let bridge = instance.bridge.pi_bot_connect_session();
        let store = &mut instance.store;
        let (what, outcome): (&str, wasmtime::Result<Option<Event>>) = match event.clone() {
            Event::Configure { sources, platforms } => (
                calls::CONFIGURE,
                bridge
                    .call_configure(store, &sources, &platforms)
                    .await
                    .map(|configuration| Some(Event::Configured { configuration })),
            ),
            Event::Start { transports } => (
                calls::START,
                bridge
                    .call_start(store, &transports)
                    .await
                    .map(|notes| Some(Event::Started { notes })),
            ),
            Event::Envelope {
                mut envelope,
                masked,
                code,
            } => {
                envelope.text = self.transcript.unmask(&envelope.text, &masked, code);
                (
                    calls::ENVELOPE,
                    bridge
                        .call_on_envelope(store, &envelope)
                        .await
                        .map(|()| None),
                )
            }
            Event::Preview {
                mut envelope,
                masked,
                code,
            } => {
                envelope.text = self.transcript.unmask(&envelope.text, &masked, code);
                (
                    calls::PREVIEW,
                    bridge
                        .call_preview_envelope(store, &envelope)
                        .await
                        .map(|text| Some(Event::PreviewText { text })),
                )
            }
            Event::AgentEvent { event } => (
                calls::AGENT_EVENT,
                bridge
                    .call_on_agent_event(store, &event)
                    .await
                    .map(|()| None),
            ),
            Event::ToolCall { call } => (
                calls::TOOL_CALL,
                bridge
                    .call_on_tool_call(store, &call)
                    .await
                    .map(|answer| Some(Event::ToolAnswer { answer })),
            ),
            Event::Question { question } => (
                calls::QUESTION,
                bridge
                    .call_on_question(store, &question)
                    .await
                    .map(|()| None),
            ),
            Event::LocalQuestionAnswer { id, answer } => (
                calls::LOCAL_QUESTION_ANSWER,
                bridge
                    .call_on_local_question_answer(store, &id, &answer)
                    .await
                    .map(|()| None),
            ),
            Event::LocalAnswer { id, approved } => (
                calls::LOCAL_ANSWER,
                bridge
                    .call_on_local_answer(store, &id, approved)
                    .await
                    .map(|()| None),
            ),
            Event::LocalCommand { args } => (
                calls::LOCAL_COMMAND,
                bridge
                    .call_on_local_command(store, &args)
                    .await
                    .map(|note| Some(Event::Note { note })),
            ),
            Event::SendFile { path, caption } => (
                calls::SEND_FILE,
                bridge
                    .call_send_file(store, &path, caption.as_deref())
                    .await
                    .map(|result| Some(Event::FileSendAnswer { result })),
            ),
            Event::Tick => (calls::TICK, bridge.call_tick(store).await.map(|()| None)),
            Event::Diagnostics => (
                calls::DIAGNOSTICS,
                bridge
                    .call_diagnostics(store)
                    .await
                    .map(|report| Some(Event::DiagnosticsReport { report })),
            ),
            Event::Shutdown => (
                calls::SHUTDOWN,
                bridge.call_shutdown(store).await.map(|()| None),
            ),
            _ => return Ok(()),
        };
        match outcome {
            Ok(Some(result)) => self.record(result),
            Ok(None) => {}
            Err(error) => {
                let Slot::Live(instance) = std::mem::replace(&mut self.slot, Slot::Moving) else {
                    unreachable!("the instance was live for this call")
                };
                let host = instance.store.into_data();
                let report = describe_trap(&error, &host.stderr_text());
                let ctx = host.into_context();
                ctx.record(|| Event::Trap {
                    call: what.to_string(),
                    cause: report,
                });
                self.slot = Slot::Idle(Box::new(ctx));
            }
        }
        Ok(())
    }
}

/// Replays `parsed` through a fresh instance of `runtime`'s component and compares each
/// input's effects with the recorded ones, in order.
pub async fn replay(runtime: &Runtime, parsed: &Parsed) -> Result<Report, ReplayError> {
    let lines = &parsed.lines;
    let first = lines
        .iter()
        .find(|(_, l)| l.dir == Dir::In)
        .ok_or(ReplayError::NoInputs)?;
    if !matches!(first.1.event, Event::Configure { .. }) {
        return Err(ReplayError::StartsMidSession {
            line: first.0,
            kind: first.1.event.kind(),
        });
    }
    let (key, recorded_bridge) = lines
        .iter()
        .find_map(|(_, l)| match &l.event {
            Event::Session { key, bridge, .. } => Some((key.clone(), bridge.clone())),
            _ => None,
        })
        .unwrap_or_else(|| ("replay".into(), String::new()));
    let clock = Arc::new(ManualClock::new(first.1.at));
    let transcript = Transcript::in_memory(&key, runtime.digest(), first.1.at);
    transcript.drain();
    let script = Script::new(lines.iter().map(|(_, l)| &l.event));
    let ctx = context(&key, clock.clone(), transcript.clone(), script)?;
    let mut driver = Driver {
        runtime,
        slot: Slot::Idle(Box::new(ctx)),
        transcript: transcript.clone(),
    };

    let mut report = Report {
        recorded_bridge,
        replayed_bridge: runtime.digest().to_string(),
        ..Report::default()
    };
    let inputs: Vec<usize> = (0..lines.len())
        .filter(|&i| lines[i].1.dir == Dir::In)
        .collect();
    // Effects recorded before the first input (none in a host-shim transcript) have no
    // input to come from; they are compared with nothing and so reported.
    for (n, &i) in inputs.iter().enumerate() {
        let (input_line, input) = &lines[i];
        let end = inputs.get(n + 1).copied().unwrap_or(lines.len());
        let expected: Vec<&(usize, crate::transcript::line::Line)> = lines[i + 1..end]
            .iter()
            .filter(|(_, l)| l.event.compared())
            .collect();
        clock.set(input.at);
        driver.feed(&input.event).await?;
        let got: Vec<Event> = transcript
            .drain()
            .into_iter()
            .filter(|l| l.event.compared())
            .map(|l| l.event)
            .collect();
        report.inputs += 1;
        report.effects += expected.len();
        let differs = (0..expected.len().max(got.len()))
            .find(|&k| expected.get(k).map(|(_, l)| &l.event) != got.get(k));
        if let Some(k) = differs {
            report.differences.push(Difference {
                line: expected.get(k).map_or(*input_line, |(number, _)| *number),
                input_line: *input_line,
                expected: expected.get(k).map(|(_, l)| l.event.to_json()),
                got: got.get(k).map(Event::to_json),
            });
        }
    }
    Ok(report)
}

/// `host-shim replay`: the exit status says identical (0), different (1) or unreadable (2).
pub async fn run(
    component: &[u8],
    component_path: Option<&Path>,
    path: &Path,
    max_differences: usize,
) -> std::process::ExitCode {
    let unreadable = std::process::ExitCode::from(2);
    let bytes = match std::fs::read(path) {
        Ok(bytes) => bytes,
        Err(e) => {
            eprintln!(
                "host-shim: cannot read the transcript {}: {e}",
                path.display()
            );
            return unreadable;
        }
    };
    let parsed = crate::transcript::read::parse(&bytes);
    for warning in &parsed.warnings {
        eprintln!("warning: {}: {warning}", path.display());
    }
    // Compiled code `run` cached, when there is some: replay writes nothing.
    let cache = super::process::setup()
        .ok()
        .and_then(|setup| super::process::cache_dir(&setup.paths));
    let runtime = match Runtime::load_read_only(component, Limits::default(), cache.as_deref()) {
        Ok(runtime) => runtime,
        Err(e) => {
            eprintln!("host-shim: cannot load the component: {e}");
            return unreadable;
        }
    };
    let report = match replay(&runtime, &parsed).await {
        Ok(report) => report,
        Err(e) => {
            eprintln!("host-shim: cannot replay {}: {e}", path.display());
            return unreadable;
        }
    };
    let against = match component_path {
        Some(p) => p.display().to_string(),
        None => "the embedded component".into(),
    };
    println!(
        "replayed {} inputs of {} against {against}; {} recorded effects compared",
        report.inputs,
        path.display(),
        report.effects
    );
    if report.differences.is_empty() {
        println!("identical");
        return std::process::ExitCode::SUCCESS;
    }
    // Which builds were compared, when it is known and not the same: "a new build behaves
    // unlike the old one" needs both names.
    if !report.recorded_bridge.is_empty() && report.recorded_bridge != report.replayed_bridge {
        println!(
            "recorded with bridge {}, replayed with bridge {}",
            report.recorded_bridge, report.replayed_bridge
        );
    }
    for difference in report.differences.iter().take(max_differences) {
        println!(
            "line {} (after the input on line {}):",
            difference.line, difference.input_line
        );
        println!(
            "  expected: {}",
            difference.expected.as_deref().unwrap_or("(nothing)")
        );
        println!(
            "  got:      {}",
            difference.got.as_deref().unwrap_or("(nothing)")
        );
    }
    let n = report.differences.len();
    println!(
        "{n} input{} with different effects{}",
        if n == 1 { "" } else { "s" },
        if n > max_differences {
            format!(" (the first {max_differences} shown)")
        } else {
            String::new()
        }
    );
    std::process::ExitCode::from(1)
}
